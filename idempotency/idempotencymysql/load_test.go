package idempotencymysql_test

import (
	"testing"

	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
)

// TestLoad runs the exactly-once load test (idemtest.Load: 5 % of the
// clients give up at random points, duplicates and retries) for
// -idem.duration, 3 s by default, under the server's default sql_mode and
// under SIMULTANEOUS_ASSIGNMENT.
func TestLoad(t *testing.T) {
	for _, mode := range sqlModes {
		t.Run(mode.name, func(t *testing.T) { idemtest.Load(t, modeEnv(mode.expr)(t), idemtest.LoadConfig{}) })
	}
}
