package testkit_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every helper must leave nothing running once its test's cleanups are done.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
