package semaphore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (a
// waiting Acquire, the lease watchers and client loops of the backends).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
