package chaos_test

import (
	"os"
	"testing"

	"github.com/concurkit/concurkit/chaos"
)

// TestMain lets Run start this test binary as its client processes.
func TestMain(m *testing.M) {
	if chaos.IsWorker() {
		os.Exit(chaos.WorkerMain())
	}
	os.Exit(m.Run())
}
