package pessimisticmysql

import (
	"context"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

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
		lock  Lock
		mysql string
	}{
		{Lock{}, " FOR UPDATE"},
		{Lock{Wait: NoWait}, " FOR UPDATE NOWAIT"},
		{Lock{Wait: SkipLocked}, " FOR UPDATE SKIP LOCKED"},
		{Lock{Wait: WaitTimeout, Timeout: 1500 * time.Millisecond}, " FOR UPDATE WAIT 2"},
		{Lock{Wait: WaitTimeout, Timeout: time.Millisecond}, " FOR UPDATE WAIT 1"},
		{Lock{Strength: ForNoKeyUpdate}, " FOR UPDATE"},
		{Lock{Strength: ForNoKeyUpdate, Wait: SkipLocked}, " FOR UPDATE SKIP LOCKED"},
		{Lock{Strength: ForShare}, " LOCK IN SHARE MODE"},
		{Lock{Strength: ForShare, Wait: NoWait}, " LOCK IN SHARE MODE NOWAIT"},
		{Lock{Strength: ForShare, Wait: WaitTimeout, Timeout: 3 * time.Second}, " LOCK IN SHARE MODE WAIT 3"},
	}
	for _, tt := range tests {
		my, err := Clause(tt.lock)
		if err != nil || my != tt.mysql {
			t.Errorf("Clause(%+v) = %q, %v; want %q", tt.lock, my, err, tt.mysql)
		}
	}
}

func TestMapError(t *testing.T) {
	my := func(n uint16) error { return &mysql.MySQLError{Number: n, Message: "m"} }
	other := errors.New("other")
	tests := []struct {
		name string
		err  error
		wait pessimistic.WaitPolicy
		want error // nil: returned unchanged
	}{
		{"mariadb nowait", my(1205), NoWait, pessimistic.ErrLockNotAvailable},
		{"mariadb wait n", my(1205), WaitTimeout, pessimistic.ErrLockTimeout},
		{"mysql innodb timeout", my(1205), Wait, pessimistic.ErrLockTimeout},
		{"mysql 8 nowait", my(3572), NoWait, pessimistic.ErrLockNotAvailable},
		{"mysql deadlock", my(1213), SkipLocked, pessimistic.ErrDeadlock},
		{"mariadb 11.6 record changed", my(1020), Wait, pessimistic.ErrSerialization},
		{"mariadb 11.6 record changed, nowait", my(1020), NoWait, pessimistic.ErrSerialization},
		{"duplicate", my(1062), Wait, nil},
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
		if !errors.Is(got, tt.want) || !errors.Is(got, tt.err) {
			t.Errorf("%s: %v, want %v wrapping the driver error", tt.name, got, tt.want)
		}
		if again := MapError(context.Background(), Lock{}, got); again != got {
			t.Errorf("%s: mapping twice changed the error", tt.name)
		}
	}
	if !retry.IsRetryable(mapError(context.Background(), my(1213), Wait)) {
		t.Error("a mapped deadlock is not retryable")
	}
	// A statement of unknown policy inside InTx: 1205 is a timeout, 3572
	// NOWAIT.
	if err := mapError(context.Background(), my(1205), txn.UnknownWait); !errors.Is(err, pessimistic.ErrLockTimeout) {
		t.Errorf("1205, unknown policy: %v", err)
	}
	if err := mapError(context.Background(), my(3572), txn.UnknownWait); !errors.Is(err, pessimistic.ErrLockNotAvailable) {
		t.Errorf("3572, unknown policy: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := MapError(ctx, Lock{}, io.ErrUnexpectedEOF); errors.Is(err, pessimistic.ErrLockTimeout) || !errors.Is(err, context.Canceled) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cancelled lock wait: %v", err)
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now())
	defer dcancel()
	<-dctx.Done()
	if err := MapError(dctx, Lock{}, my(1317)); errors.Is(err, pessimistic.ErrLockTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("lock wait past the caller's deadline: %v", err)
	}
	// The server's own timeout stays ErrLockTimeout even if ctx ended too.
	if err := MapError(dctx, Lock{}, my(1205)); !errors.Is(err, pessimistic.ErrLockTimeout) {
		t.Errorf("server lock timeout with an ended ctx: %v", err)
	}
}

// TestMariaDBRecordChanged: MariaDB ≥ 11.6 reports a REPEATABLE READ
// write conflict as error 1020; it must map to ErrSerialization, which
// InTx and retry.IsRetryable retry.
func TestMariaDBRecordChanged(t *testing.T) {
	raw := &mysql.MySQLError{Number: 1020, Message: "Record has changed since last read in table 't'"}
	err := MapError(context.Background(), Lock{}, raw)
	if !errors.Is(err, pessimistic.ErrSerialization) || !errors.Is(err, raw) {
		t.Fatalf("MapError(1020) = %v, want ErrSerialization wrapping the driver error", err)
	}
	if !retry.IsRetryable(err) {
		t.Fatal("1020 not retryable")
	}
	o, _ := txn.Resolve(pkg, nil)
	if !o.Retry.Retryable(mapError(context.Background(), raw, txn.UnknownWait)) {
		t.Fatal("InTx's default classifier does not retry 1020")
	}
}

// TestWaitSeconds: WAIT n rounds up to whole seconds (never to 0, which is
// NOWAIT) and saturates at the server's maximum instead of overflowing.
func TestWaitSeconds(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		wait int64
	}{
		{time.Nanosecond, 1},
		{999 * time.Microsecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + 1, 1},
		{time.Second, 1},
		{time.Second + 1, 2},
		{math.MaxInt32 * time.Millisecond, 2147484},
		{math.MaxInt32*time.Millisecond + 1, 2147484},
		{31536000 * time.Second, 31536000},
		{31536000*time.Second + 1, 31536000},
		{math.MaxInt64 - 1, 31536000},
		{math.MaxInt64, 31536000},
	} {
		clause, err := Clause(Lock{Wait: WaitTimeout, Timeout: tt.d})
		if want := " FOR UPDATE WAIT " + strconv.FormatInt(tt.wait, 10); err != nil || clause != want {
			t.Errorf("WAIT for %v = %q, %v; want %q", tt.d, clause, err, want)
		}
	}
	for _, d := range []time.Duration{0, -1, math.MinInt64} {
		if _, err := Clause(Lock{Wait: WaitTimeout, Timeout: d}); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("WaitTimeout %v: %v, want ErrInvalidArgument", d, err)
		}
	}
}

// FuzzLockClause: any Lock either fails validation or yields a known
// clause, never panics; WAIT n is rounded up and clamped, never wrapped.
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
		if !strings.HasPrefix(c, " FOR ") && !strings.HasPrefix(c, " LOCK IN SHARE MODE") || strings.ContainsAny(c, ";'\"`") {
			t.Fatalf("clause %q", c)
		}
		if l.Wait == WaitTimeout {
			_, after, _ := strings.Cut(c, " WAIT ")
			n, err := strconv.ParseInt(after, 10, 64)
			if err != nil || n < 1 || n > maxWaitSeconds || time.Duration(n)*time.Second < min(l.Timeout, maxWaitSeconds*time.Second) {
				t.Fatalf("timeout %v: clause %q", l.Timeout, c)
			}
		}
	})
}

// FuzzClaimSQL: every name either is rejected or is quoted so that the
// statements contain it as exactly one identifier.
func FuzzClaimSQL(f *testing.F) {
	f.Add("jobs", "state", "pending")
	f.Add(`a"b`, "st`ate", "x")
	f.Add("", "s", "")
	f.Add("j\x00", "s", "p")
	f.Add("j%sx", "%[1]s", "p")
	f.Fuzz(func(t *testing.T, table, col, pending string) {
		o := &pessimistic.ClaimOptions{StateColumn: col, Pending: pending}
		c, err := claimNames(table, 1, o)
		if err != nil {
			if !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Fatalf("%v", err)
			}
			return
		}
		sel, upd := selectStatement(c), updateStatement(c, 2)
		for _, n := range []struct{ quoted, raw string }{{c.Table, table}, {c.State, orDefault(col, "state")}} {
			checkQuoted(t, n.quoted, n.raw, "`")
			if !strings.Contains(sel, n.quoted) || !strings.Contains(upd, n.quoted) {
				t.Fatalf("statements %q, %q lack %q", sel, upd, n.quoted)
			}
		}
		if !strings.HasSuffix(upd, " IN (?,?)") {
			t.Fatalf("update %q", upd)
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
