package idempotencypg_test

import (
	"testing"

	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
)

// TestLoad runs the exactly-once load test (idemtest.Load: 5 % of the
// clients give up at random points, duplicates and retries) for
// -idem.duration, 3 s by default.
func TestLoad(t *testing.T) { idemtest.Load(t, newEnv(t), idemtest.LoadConfig{}) }
