package pessimistic

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

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/retry"
)

func TestLockClauses(t *testing.T) {
	tests := []struct {
		lock      Lock
		pg, mysql string
	}{
		{Lock{}, " FOR UPDATE", " FOR UPDATE"},
		{Lock{Wait: NoWait}, " FOR UPDATE NOWAIT", " FOR UPDATE NOWAIT"},
		{Lock{Wait: SkipLocked}, " FOR UPDATE SKIP LOCKED", " FOR UPDATE SKIP LOCKED"},
		{Lock{Wait: WaitTimeout, Timeout: 1500 * time.Millisecond}, " FOR UPDATE", " FOR UPDATE WAIT 2"},
		{Lock{Wait: WaitTimeout, Timeout: time.Millisecond}, " FOR UPDATE", " FOR UPDATE WAIT 1"},
		{Lock{Strength: ForNoKeyUpdate}, " FOR NO KEY UPDATE", " FOR UPDATE"},
		{Lock{Strength: ForNoKeyUpdate, Wait: SkipLocked}, " FOR NO KEY UPDATE SKIP LOCKED", " FOR UPDATE SKIP LOCKED"},
		{Lock{Strength: ForShare}, " FOR SHARE", " LOCK IN SHARE MODE"},
		{Lock{Strength: ForShare, Wait: NoWait}, " FOR SHARE NOWAIT", " LOCK IN SHARE MODE NOWAIT"},
		{Lock{Strength: ForShare, Wait: WaitTimeout, Timeout: 3 * time.Second}, " FOR SHARE", " LOCK IN SHARE MODE WAIT 3"},
	}
	for _, tt := range tests {
		pg, err := tt.lock.Postgres()
		if err != nil || pg != tt.pg {
			t.Errorf("%+v.Postgres() = %q, %v; want %q", tt.lock, pg, err, tt.pg)
		}
		my, err := tt.lock.MySQL()
		if err != nil || my != tt.mysql {
			t.Errorf("%+v.MySQL() = %q, %v; want %q", tt.lock, my, err, tt.mysql)
		}
	}
}

func TestMapError(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("driver: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	my := func(n uint16) error { return &mysql.MySQLError{Number: n, Message: "m"} }
	other := errors.New("other")
	tests := []struct {
		name string
		err  error
		wait WaitPolicy
		want error // nil: returned unchanged
	}{
		{"pg nowait", pg("55P03"), NoWait, ErrLockNotAvailable},
		{"pg lock_timeout", pg("55P03"), WaitTimeout, ErrLockTimeout},
		{"pg lock_timeout plain wait", pg("55P03"), Wait, ErrLockTimeout},
		{"pg deadlock", pg("40P01"), Wait, ErrDeadlock},
		{"pg serialization", pg("40001"), NoWait, ErrSerialization},
		{"mariadb nowait", my(1205), NoWait, ErrLockNotAvailable},
		{"mariadb wait n", my(1205), WaitTimeout, ErrLockTimeout},
		{"mysql innodb timeout", my(1205), Wait, ErrLockTimeout},
		{"mysql 8 nowait", my(3572), NoWait, ErrLockNotAvailable},
		{"mysql deadlock", my(1213), SkipLocked, ErrDeadlock},
		{"mariadb 11.6 record changed", my(1020), Wait, ErrSerialization},
		{"mariadb 11.6 record changed, nowait", my(1020), NoWait, ErrSerialization},
		{"unique violation", pg("23505"), Wait, nil},
		{"other", other, Wait, nil},
	}
	for _, tt := range tests {
		got := Lock{Wait: tt.wait}.MapError(context.Background(), tt.err)
		if tt.want == nil {
			if got != tt.err {
				t.Errorf("%s: %v, want unchanged", tt.name, got)
			}
			continue
		}
		if !errors.Is(got, tt.want) || !errors.Is(got, errors.Unwrap(tt.err)) && !errors.Is(got, tt.err) {
			t.Errorf("%s: %v, want %v wrapping the driver error", tt.name, got, tt.want)
		}
		if again := (Lock{}).MapError(context.Background(), got); again != got {
			t.Errorf("%s: mapping twice changed the error", tt.name)
		}
	}
	// Retryability follows the sentinel.
	if !retry.IsRetryable(mapError(context.Background(), pg("40P01"), Wait, false)) ||
		!retry.IsRetryable(ErrSerialization) || retry.IsRetryable(ErrLockNotAvailable) || retry.IsRetryable(ErrLockTimeout) {
		t.Error("retryability of the sentinels is wrong")
	}
	// Unknown policy (a statement run by the caller inside InTx).
	if err := mapError(context.Background(), pg("55P03"), unknownWait, false); !errors.Is(err, ErrLockNotAvailable) {
		t.Errorf("55P03 without lock_timeout: %v", err)
	}
	if err := mapError(context.Background(), pg("55P03"), unknownWait, true); !errors.Is(err, ErrLockTimeout) {
		t.Errorf("55P03 with lock_timeout: %v", err)
	}
	// Cancelled context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A wait ended by the caller's context is cancellation, not the
	// server's lock timeout.
	if err := (Lock{}).MapError(ctx, io.ErrUnexpectedEOF); errors.Is(err, ErrLockTimeout) || !errors.Is(err, context.Canceled) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cancelled lock wait: %v", err)
	}
	if err := (Lock{Wait: WaitTimeout, Timeout: time.Second}).MapError(ctx, pg("57014")); errors.Is(err, ErrLockTimeout) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled lock wait (57014): %v", err)
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now())
	defer dcancel()
	<-dctx.Done()
	if err := (Lock{}).MapError(dctx, my(1317)); errors.Is(err, ErrLockTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("lock wait past the caller's deadline: %v", err)
	}
	// The server's own timeout stays ErrLockTimeout even if ctx ended too.
	if err := (Lock{}).MapError(dctx, my(1205)); !errors.Is(err, ErrLockTimeout) {
		t.Errorf("server lock timeout with an ended ctx: %v", err)
	}
	if err := mapError(ctx, io.ErrUnexpectedEOF, unknownWait, false); errors.Is(err, ErrLockTimeout) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled non-lock statement: %v", err)
	}
	if err := (Lock{}).MapError(ctx, pg("40P01")); !errors.Is(err, ErrDeadlock) {
		t.Errorf("deadlock while cancelled: %v", err)
	}
}

// TestMariaDBRecordChanged: MariaDB ≥ 11.6 reports a REPEATABLE READ
// write conflict as error 1020; it must map to ErrSerialization, which
// InTx and retry.IsRetryable retry.
func TestMariaDBRecordChanged(t *testing.T) {
	raw := &mysql.MySQLError{Number: 1020, Message: "Record has changed since last read in table 't'"}
	err := Lock{}.MapError(context.Background(), raw)
	if !errors.Is(err, ErrSerialization) || !errors.Is(err, raw) {
		t.Fatalf("MapError(1020) = %v, want ErrSerialization wrapping the driver error", err)
	}
	if !retry.IsRetryable(err) {
		t.Fatal("1020 not retryable")
	}
	o, _ := (*Options)(nil).value()
	if !o.Retry.Retryable(mapError(context.Background(), raw, unknownWait, false)) {
		t.Fatal("InTxMySQL's default classifier does not retry 1020")
	}
}

// TestDurationConversions: lock timeouts round up to the server's unit
// (never to 0, which means no timeout / NOWAIT) and saturate at the
// server's maximum instead of overflowing.
func TestDurationConversions(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		pg   string
		wait int64
	}{
		{time.Nanosecond, "1ms", 1},
		{999 * time.Microsecond, "1ms", 1},
		{time.Millisecond, "1ms", 1},
		{time.Millisecond + 1, "2ms", 1},
		{time.Second, "1000ms", 1},
		{time.Second + 1, "1001ms", 2},
		{math.MaxInt32 * time.Millisecond, "2147483647ms", 2147484},
		{math.MaxInt32*time.Millisecond + 1, "2147483647ms", 2147484},
		{31536000 * time.Second, "2147483647ms", 31536000},
		{31536000*time.Second + 1, "2147483647ms", 31536000},
		{math.MaxInt64 - 1, "2147483647ms", 31536000},
		{math.MaxInt64, "2147483647ms", 31536000},
	} {
		if got := pgInterval(tt.d); got != tt.pg {
			t.Errorf("pgInterval(%v) = %q, want %q", tt.d, got, tt.pg)
		}
		clause, err := Lock{Wait: WaitTimeout, Timeout: tt.d}.MySQL()
		if want := " FOR UPDATE WAIT " + strconv.FormatInt(tt.wait, 10); err != nil || clause != want {
			t.Errorf("WAIT for %v = %q, %v; want %q", tt.d, clause, err, want)
		}
	}
	for _, d := range []time.Duration{0, -1, math.MinInt64} {
		if _, err := (Lock{Wait: WaitTimeout, Timeout: d}).MySQL(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("WaitTimeout %v: %v, want ErrInvalidArgument", d, err)
		}
		if d < 0 {
			if _, err := (&Options{LockTimeout: d}).value(); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("LockTimeout %v: %v, want ErrInvalidArgument", d, err)
			}
		}
	}
}

func TestAmbiguousCommitError(t *testing.T) {
	inner := io.ErrUnexpectedEOF
	var err error = &AmbiguousCommitError{Err: inner}
	if !errors.Is(err, inner) || !strings.Contains(err.Error(), "commit outcome unknown") {
		t.Errorf("%v", err)
	}
	o, _ := (&Options{}).value()
	if o.Retry.Retryable(err) {
		t.Error("ambiguous commit retryable")
	}
	// Even when wrapping a retryable cause, an ambiguous commit is not retried.
	if o.Retry.Retryable(&AmbiguousCommitError{Err: ErrDeadlock}) {
		t.Error("ambiguous commit wrapping a deadlock retryable")
	}
}

func TestOptionsClassifier(t *testing.T) {
	var nilOpts *Options
	def, err := nilOpts.value()
	if err != nil {
		t.Fatal(err)
	}
	nw, _ := (&Options{RetryLockNotAvailable: true}).value()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cancelled := mapError(ctx, io.EOF, NoWait, false)
	for _, tt := range []struct {
		err     error
		def, nw bool
	}{
		{wrap(ErrDeadlock, io.EOF), true, true},
		{ErrSerialization, true, true},
		{wrap(ErrLockNotAvailable, io.EOF), false, true},
		{ErrLockTimeout, false, false},
		{cancelled, false, false},
		{io.EOF, false, false},
	} {
		if got := def.Retry.Retryable(tt.err); got != tt.def {
			t.Errorf("default Retryable(%v) = %v", tt.err, got)
		}
		if got := nw.Retry.Retryable(tt.err); got != tt.nw {
			t.Errorf("RetryLockNotAvailable Retryable(%v) = %v", tt.err, got)
		}
	}
	// value never mutates the caller's struct.
	o := &Options{}
	if _, err := o.value(); err != nil || o.Retry.Retryable != nil {
		t.Error("Options mutated")
	}
}

// FuzzLockClause: any Lock either fails validation or yields one of the
// known clauses, never panics.
func FuzzLockClause(f *testing.F) {
	f.Add(uint8(0), uint8(0), int64(0))
	f.Add(uint8(2), uint8(3), int64(time.Second))
	f.Add(uint8(9), uint8(1), int64(-1))
	f.Add(uint8(0), uint8(3), int64(math.MaxInt64))
	f.Add(uint8(0), uint8(3), int64(1))
	f.Fuzz(func(t *testing.T, s, w uint8, d int64) {
		l := Lock{Strength: Strength(s), Wait: WaitPolicy(w), Timeout: time.Duration(d)}
		pg, perr := l.Postgres()
		my, merr := l.MySQL()
		if (perr == nil) != (l.Validate() == nil) || (merr == nil) != (perr == nil) {
			t.Fatalf("%+v: inconsistent validation %v / %v", l, perr, merr)
		}
		if perr != nil {
			if !errors.Is(perr, ErrInvalidArgument) {
				t.Fatalf("%v", perr)
			}
			return
		}
		for _, c := range []string{pg, my} {
			if !strings.HasPrefix(c, " FOR ") && !strings.HasPrefix(c, " LOCK IN SHARE MODE") {
				t.Fatalf("clause %q", c)
			}
			if strings.ContainsAny(c, ";'\"`") {
				t.Fatalf("clause %q", c)
			}
		}
		if l.Wait == WaitTimeout {
			// Rounded up (never below the timeout, never 0) and clamped to
			// the server's maximum, never wrapped around.
			_, after, _ := strings.Cut(my, " WAIT ")
			n, err := strconv.ParseInt(after, 10, 64)
			if err != nil || n < 1 || n > myMaxWaitSeconds || time.Duration(n)*time.Second < min(l.Timeout, myMaxWaitSeconds*time.Second) {
				t.Fatalf("timeout %v: clause %q", l.Timeout, my)
			}
			ms, err := strconv.ParseInt(strings.TrimSuffix(pgInterval(l.Timeout), "ms"), 10, 64)
			if err != nil || ms < 1 || ms > pgMaxMillis || time.Duration(ms)*time.Millisecond < min(l.Timeout, pgMaxMillis*time.Millisecond) {
				t.Fatalf("timeout %v: lock_timeout %q", l.Timeout, pgInterval(l.Timeout))
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
	f.Fuzz(func(t *testing.T, table, col, pending string) {
		o := &ClaimOptions{StateColumn: col, Pending: pending}
		for _, d := range []struct {
			quote func(...string) (string, error)
			open  string
		}{{ident.Postgres, `"`}, {ident.MySQL, "`"}} {
			c, err := o.build(table, 1, d.quote)
			if err != nil {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("%v", err)
				}
				continue
			}
			for _, q := range []struct{ quoted, raw string }{{c.table, table}, {c.state, orDefault(col, "state")}} {
				if !strings.HasPrefix(q.quoted, d.open) || !strings.HasSuffix(q.quoted, d.open) {
					t.Fatalf("not quoted: %q", q.quoted)
				}
				inner := q.quoted[1 : len(q.quoted)-1]
				if strings.ReplaceAll(inner, d.open+d.open, d.open) != q.raw {
					t.Fatalf("%q does not round-trip to %q", q.quoted, q.raw)
				}
				if strings.Contains(strings.ReplaceAll(inner, d.open+d.open, ""), d.open) {
					t.Fatalf("unescaped quote in %q", q.quoted)
				}
			}
		}
	})
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
