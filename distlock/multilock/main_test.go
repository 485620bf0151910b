package multilock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (the
// watches of a set's leases, the backends' watchers and cleanups).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
