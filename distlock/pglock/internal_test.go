package pglock

import (
	"math"
	"testing"
	"time"
)

// TestMilliseconds: idle_session_timeout is the TTL in milliseconds
// rounded up — never 0 (no timeout) and never shorter than the TTL.
func TestMilliseconds(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{time.Nanosecond, "1"},
		{999 * time.Microsecond, "1"},
		{time.Millisecond, "1"},
		{time.Millisecond + 1, "2"},
		{1500 * time.Microsecond, "2"},
		{10 * time.Second, "10000"},
		{math.MaxInt32 * time.Millisecond, "2147483647"},
		{math.MaxInt64, "2147483647"}, // unreachable (checkTTL), but never overflows
	} {
		if got := ms(tt.d); got != tt.want {
			t.Errorf("ms(%v) = %s, want %s", tt.d, got, tt.want)
		}
	}
}
