package election_test

import (
	"testing"

	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/internal/backendtest"
)

// TestElection runs the election suite (distlocktest.Election) on every
// lock backend: one leader at a time, terms strictly increasing, a
// deposed leader fenced out of storage and off the board, Lead's
// re-campaign, Observe.
func TestElection(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, backend string, newLocker distlocktest.NewLocker) {
		distlocktest.Election(t, newLocker, backendtest.Options(backend))
	})
}
