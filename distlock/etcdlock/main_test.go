package etcdlock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (lease
// watchers, client event loops).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
