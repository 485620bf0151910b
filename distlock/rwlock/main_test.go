package rwlock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (a
// waiting RLock or Lock, Lock's renewal while it waits, the lease
// watchers and client loops of the backends).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
