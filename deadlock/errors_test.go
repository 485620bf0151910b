package deadlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/deadlock"
)

// TestBadInputMatchesErrInvalidArgument: every bad-input error of the
// package matches both its own sentinel and the module's one bad-input
// sentinel, concurkit.ErrInvalidArgument; the others (a simulation
// outcome, a bug) do not.
func TestBadInputMatchesErrInvalidArgument(t *testing.T) {
	var m deadlock.LockManager
	_, modeErr := m.Acquire(1, 1, 0)
	_, tryModeErr := m.TryAcquire(1, 1, 9)
	mustAcquire(t, &m, 1, 1, X, deadlock.Granted)
	mustAcquire(t, &m, 2, 1, X, deadlock.Waiting)
	_, waitErr := m.Acquire(2, 2, X)
	_, genErr := deadlock.Workload{ReadRatio: 2}.Generate()
	_, simErr := deadlock.Simulate(t.Context(), []deadlock.Txn{{ID: 1}, {ID: 1}}, nil)
	_, optErr := deadlock.Simulate(t.Context(), nil, &deadlock.Options{Concurrency: -1})
	_, policyErr := deadlock.ParsePolicy("optimistic")
	_, victimErr := deadlock.ParseVictim("oldest")
	for _, c := range []struct {
		name     string
		err, own error
	}{
		{"Acquire mode 0", modeErr, deadlock.ErrInvalidMode},
		{"TryAcquire mode 9", tryModeErr, deadlock.ErrInvalidMode},
		{"Acquire while waiting", waitErr, deadlock.ErrAlreadyWaiting},
		{"Generate", genErr, deadlock.ErrInvalidWorkload},
		{"Simulate duplicate IDs", simErr, deadlock.ErrInvalidWorkload},
		{"Simulate negative option", optErr, deadlock.ErrInvalidWorkload},
		{"ParsePolicy", policyErr, deadlock.ErrInvalidWorkload},
		{"ParseVictim", victimErr, deadlock.ErrInvalidWorkload},
	} {
		if !errors.Is(c.err, c.own) || !errors.Is(c.err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v matches %v: %t, concurkit.ErrInvalidArgument: %t", c.name, c.err, c.own, errors.Is(c.err, c.own), errors.Is(c.err, concurkit.ErrInvalidArgument))
		}
		if !strings.HasPrefix(c.err.Error(), "deadlock: ") {
			t.Errorf("%s: message %q lacks the package prefix", c.name, c.err)
		}
	}
	for _, e := range []error{deadlock.ErrStuck, deadlock.ErrLimit, deadlock.ErrInvariant, deadlock.ErrNotSerializable} {
		if errors.Is(e, concurkit.ErrInvalidArgument) {
			t.Errorf("%v matches ErrInvalidArgument", e)
		}
	}
}
