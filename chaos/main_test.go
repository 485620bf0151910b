package chaos_test

import (
	"os"
	"testing"

	"github.com/concurkit/concurkit/chaos"
)

// TestMain lets Run start this test binary as its client processes.
func TestMain(m *testing.M) {
	if os.Getenv(lingerEnv) != "" {
		os.Exit(lingerMain())
	}
	if addr := os.Getenv(serverEnv); addr != "" {
		os.Exit(lingeringServerMain(addr))
	}
	if chaos.IsWorker() {
		os.Exit(chaos.WorkerMain())
	}
	os.Exit(m.Run())
}
