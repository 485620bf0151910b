package pessimistic_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutines of its own; goleak checks that none of
// the tests' goroutines (workers, proxies, waiters) outlive them either.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
