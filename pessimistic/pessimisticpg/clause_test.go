package pessimisticpg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/internal/txn"
	"github.com/concurkit/concurkit/retry"
)

type (
	Lock = pessimistic.Lock
)

const (
	NoWait         = pessimistic.NoWait
	SkipLocked     = pessimistic.SkipLocked
	WaitTimeout    = pessimistic.WaitTimeout
	Wait           = pessimistic.Wait
	ForNoKeyUpdate = pessimistic.ForNoKeyUpdate
	ForShare       = pessimistic.ForShare
)

func TestClause(t *testing.T) {
	tests := []struct {
		lock Lock
		pg   string
	}{
		{Lock{}, " FOR UPDATE"},
		{Lock{Wait: NoWait}, " FOR UPDATE NOWAIT"},
		{Lock{Wait: SkipLocked}, " FOR UPDATE SKIP LOCKED"},
		{Lock{Wait: WaitTimeout, Timeout: 1500 * time.Millisecond}, " FOR UPDATE"},
		{Lock{Wait: WaitTimeout, Timeout: time.Millisecond}, " FOR UPDATE"},
		{Lock{Strength: ForNoKeyUpdate}, " FOR NO KEY UPDATE"},
		{Lock{Strength: ForNoKeyUpdate, Wait: SkipLocked}, " FOR NO KEY UPDATE SKIP LOCKED"},
		{Lock{Strength: ForShare}, " FOR SHARE"},
		{Lock{Strength: ForShare, Wait: NoWait}, " FOR SHARE NOWAIT"},
		{Lock{Strength: ForShare, Wait: WaitTimeout, Timeout: 3 * time.Second}, " FOR SHARE"},
	}
	for _, tt := range tests {
		pg, err := Clause(tt.lock)
		if err != nil || pg != tt.pg {
			t.Errorf("Clause(%+v) = %q, %v; want %q", tt.lock, pg, err, tt.pg)
		}
	}
}

func TestMapError(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("driver: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	other := errors.New("other")
	tests := []struct {
		name string
		err  error
		wait pessimistic.WaitPolicy
		want error // nil: returned unchanged
	}{
		{"pg nowait", pg("55P03"), NoWait, pessimistic.ErrLockNotAvailable},
		{"pg lock_timeout", pg("55P03"), WaitTimeout, pessimistic.ErrLockTimeout},
		{"pg lock_timeout plain wait", pg("55P03"), Wait, pessimistic.ErrLockTimeout},
		{"pg deadlock", pg("40P01"), Wait, pessimistic.ErrDeadlock},
		{"pg serialization", pg("40001"), NoWait, pessimistic.ErrSerialization},
		{"unique violation", pg("23505"), Wait, nil},
		{"other", other, Wait, nil},
	}
	for _, tt := range tests {
		got := MapError(context.Background(), Lock{Wait: tt.wait}, tt.err)
		if tt.want == nil {
			if got != tt.err {
				t.Errorf("%s: %v, want unchanged", tt.name, got)
			}
			continue
		}
		if !errors.Is(got, tt.want) || !errors.Is(got, errors.Unwrap(tt.err)) && !errors.Is(got, tt.err) {
			t.Errorf("%s: %v, want %v wrapping the driver error", tt.name, got, tt.want)
		}
		if again := MapError(context.Background(), Lock{}, got); again != got {
			t.Errorf("%s: mapping twice changed the error", tt.name)
		}
	}
	// Retryability follows the sentinel.
	if !retry.IsRetryable(mapError(context.Background(), pg("40P01"), Wait, false)) ||
		!retry.IsRetryable(pessimistic.ErrSerialization) || retry.IsRetryable(pessimistic.ErrLockNotAvailable) || retry.IsRetryable(pessimistic.ErrLockTimeout) {
		t.Error("retryability of the sentinels is wrong")
	}
	// Unknown policy (a statement run by the caller inside InTx).
	if err := mapError(context.Background(), pg("55P03"), txn.UnknownWait, false); !errors.Is(err, pessimistic.ErrLockNotAvailable) {
		t.Errorf("55P03 without lock_timeout: %v", err)
	}
	if err := mapError(context.Background(), pg("55P03"), txn.UnknownWait, true); !errors.Is(err, pessimistic.ErrLockTimeout) {
		t.Errorf("55P03 with lock_timeout: %v", err)
	}
	// Cancelled context: a wait ended by the caller's context is
	// cancellation, not the server's lock timeout.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := MapError(ctx, Lock{}, io.ErrUnexpectedEOF); errors.Is(err, pessimistic.ErrLockTimeout) || !errors.Is(err, context.Canceled) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cancelled lock wait: %v", err)
	}
	if err := MapError(ctx, Lock{Wait: WaitTimeout, Timeout: time.Second}, pg("57014")); errors.Is(err, pessimistic.ErrLockTimeout) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled lock wait (57014): %v", err)
	}
	if err := mapError(ctx, io.ErrUnexpectedEOF, txn.UnknownWait, false); errors.Is(err, pessimistic.ErrLockTimeout) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled non-lock statement: %v", err)
	}
	if err := MapError(ctx, Lock{}, pg("40P01")); !errors.Is(err, pessimistic.ErrDeadlock) {
		t.Errorf("deadlock while cancelled: %v", err)
	}
}

// TestInterval: lock_timeout rounds up to milliseconds (never to 0, which
// means no timeout) and saturates at the server's maximum instead of
// overflowing.
func TestInterval(t *testing.T) {
	for _, tt := range []struct {
		d  time.Duration
		pg string
	}{
		{time.Nanosecond, "1ms"},
		{999 * time.Microsecond, "1ms"},
		{time.Millisecond, "1ms"},
		{time.Millisecond + 1, "2ms"},
		{time.Second, "1000ms"},
		{time.Second + 1, "1001ms"},
		{math.MaxInt32 * time.Millisecond, "2147483647ms"},
		{math.MaxInt32*time.Millisecond + 1, "2147483647ms"},
		{31536000 * time.Second, "2147483647ms"},
		{31536000*time.Second + 1, "2147483647ms"},
		{math.MaxInt64 - 1, "2147483647ms"},
		{math.MaxInt64, "2147483647ms"},
	} {
		if got := interval(tt.d); got != tt.pg {
			t.Errorf("interval(%v) = %q, want %q", tt.d, got, tt.pg)
		}
	}
	for _, d := range []time.Duration{0, -1, math.MinInt64} {
		if _, err := Clause(Lock{Wait: WaitTimeout, Timeout: d}); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("WaitTimeout %v: %v, want ErrInvalidArgument", d, err)
		}
	}
}

// FuzzLockClause: any Lock either fails validation or yields a known
// clause, never panics; WaitTimeout's lock_timeout is rounded up and
// clamped, never wrapped.
func FuzzLockClause(f *testing.F) {
	f.Add(uint8(0), uint8(0), int64(0))
	f.Add(uint8(2), uint8(3), int64(time.Second))
	f.Add(uint8(9), uint8(1), int64(-1))
	f.Add(uint8(0), uint8(3), int64(math.MaxInt64))
	f.Add(uint8(0), uint8(3), int64(1))
	f.Fuzz(func(t *testing.T, s, w uint8, d int64) {
		l := Lock{Strength: pessimistic.Strength(s), Wait: pessimistic.WaitPolicy(w), Timeout: time.Duration(d)}
		c, err := Clause(l)
		if (err == nil) != (l.Validate() == nil) {
			t.Fatalf("%+v: inconsistent validation %v / %v", l, err, l.Validate())
		}
		if err != nil {
			if !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Fatalf("%v", err)
			}
			return
		}
		if !strings.HasPrefix(c, " FOR ") || strings.ContainsAny(c, ";'\"`") {
			t.Fatalf("clause %q", c)
		}
		if l.Wait == WaitTimeout {
			ms, err := strconv.ParseInt(strings.TrimSuffix(interval(l.Timeout), "ms"), 10, 64)
			if err != nil || ms < 1 || ms > maxMillis || time.Duration(ms)*time.Millisecond < min(l.Timeout, maxMillis*time.Millisecond) {
				t.Fatalf("timeout %v: lock_timeout %q", l.Timeout, interval(l.Timeout))
			}
		}
	})
}

// FuzzClaimSQL: every name either is rejected or is quoted so that the
// statement contains it as exactly one identifier.
func FuzzClaimSQL(f *testing.F) {
	f.Add("jobs", "state", "pending")
	f.Add(`a"b`, "st`ate", "x")
	f.Add("", "s", "")
	f.Add("j\x00", "s", "p")
	f.Add("j%sx", "%[1]s", "p")
	f.Fuzz(func(t *testing.T, table, col, pending string) {
		o := &pessimistic.ClaimOptions{StateColumn: col, Pending: pending}
		q, c, err := claimStatement(table, 1, o)
		if err != nil {
			if !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Fatalf("%v", err)
			}
			return
		}
		for _, n := range []struct{ quoted, raw string }{{c.Table, table}, {c.State, orDefault(col, "state")}} {
			checkQuoted(t, n.quoted, n.raw, `"`)
			if !strings.Contains(q, n.quoted) {
				t.Fatalf("statement %q lacks %q", q, n.quoted)
			}
		}
	})
}

func checkQuoted(t *testing.T, quoted, raw, open string) {
	t.Helper()
	if !strings.HasPrefix(quoted, open) || !strings.HasSuffix(quoted, open) {
		t.Fatalf("not quoted: %q", quoted)
	}
	inner := quoted[1 : len(quoted)-1]
	if strings.ReplaceAll(inner, open+open, open) != raw {
		t.Fatalf("%q does not round-trip to %q", quoted, raw)
	}
	if strings.Contains(strings.ReplaceAll(inner, open+open, ""), open) {
		t.Fatalf("unescaped quote in %q", quoted)
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
