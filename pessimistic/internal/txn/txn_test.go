package txn

import (
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/retry"
)

// TestMap: each class becomes its sentinel with the driver error kept in
// the chain; mapping twice changes nothing; a context that ended turns an
// unclassified or cancelled statement into cancellation, never into
// ErrLockTimeout, while the server's own answers keep their class.
func TestMap(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		class sqlerr.Class
		want  error
	}{
		{sqlerr.Deadlock, pessimistic.ErrDeadlock},
		{sqlerr.Serialization, pessimistic.ErrSerialization},
		{sqlerr.LockNotAvailable, pessimistic.ErrLockNotAvailable},
		{sqlerr.LockTimeout, pessimistic.ErrLockTimeout},
		{sqlerr.UniqueViolation, nil},
		{sqlerr.QueryCanceled, nil},
		{sqlerr.Unknown, nil},
	} {
		driver := errors.New("driver says " + tc.class.String())
		got := Map(ctx, driver, tc.class)
		if tc.want == nil {
			if got != driver {
				t.Errorf("%v: %v, want unchanged", tc.class, got)
			}
			continue
		}
		if !errors.Is(got, tc.want) || !errors.Is(got, driver) {
			t.Errorf("%v: %v, want %v wrapping the driver error", tc.class, got, tc.want)
		}
		if again := Map(ctx, got, sqlerr.Unknown); again != got {
			t.Errorf("%v: mapping twice changed the error", tc.class)
		}
	}
	if Map(ctx, nil, sqlerr.Deadlock) != nil {
		t.Error("nil mapped to an error")
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []sqlerr.Class{sqlerr.Unknown, sqlerr.QueryCanceled} {
		if err := Map(cancelled, io.ErrUnexpectedEOF, c); errors.Is(err, pessimistic.ErrLockTimeout) || !errors.Is(err, context.Canceled) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cancelled, %v: %v", c, err)
		}
	}
	already := errors.Join(context.Canceled, io.EOF)
	if err := Map(cancelled, already, sqlerr.Unknown); err != already {
		t.Errorf("an error already matching ctx.Err() was rewrapped: %v", err)
	}
	if err := Map(cancelled, io.EOF, sqlerr.Deadlock); !errors.Is(err, pessimistic.ErrDeadlock) {
		t.Errorf("deadlock while cancelled: %v", err)
	}
	dctx, dcancel := context.WithDeadline(ctx, time.Now())
	defer dcancel()
	<-dctx.Done()
	if err := Map(dctx, io.EOF, sqlerr.LockTimeout); !errors.Is(err, pessimistic.ErrLockTimeout) {
		t.Errorf("the server's lock timeout with an ended ctx: %v", err)
	}
	if err := Map(dctx, io.EOF, sqlerr.QueryCanceled); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, pessimistic.ErrLockTimeout) {
		t.Errorf("lock wait past the caller's deadline: %v", err)
	}
}

// TestAmbiguousCommitNotRetried: the classifier never retries an
// outcome-unknown commit, even one wrapping a retryable cause.
func TestAmbiguousCommitNotRetried(t *testing.T) {
	var err error = &concurkit.AmbiguousCommitError{Err: io.ErrUnexpectedEOF}
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, concurkit.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "commit outcome unknown") {
		t.Errorf("%v", err)
	}
	o, _ := Resolve("p", &pessimistic.Options{})
	if o.Retry.Retryable(err) {
		t.Error("ambiguous commit retryable")
	}
	if o.Retry.Retryable(&concurkit.AmbiguousCommitError{Err: pessimistic.ErrDeadlock}) {
		t.Error("ambiguous commit wrapping a deadlock retryable")
	}
}

// conflict stands for optimistic.ErrConflict: retryable by its method.
type conflict struct{}

func (conflict) Error() string   { return "version conflict" }
func (conflict) Retryable() bool { return true }

func TestResolveClassifier(t *testing.T) {
	def, err := Resolve("p", nil)
	if err != nil {
		t.Fatal(err)
	}
	nw, _ := Resolve("p", &pessimistic.Options{RetryLockNotAvailable: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cancelled := Map(ctx, io.EOF, sqlerr.Unknown)
	for _, tt := range []struct {
		err     error
		def, nw bool
	}{
		{wrap(pessimistic.ErrDeadlock, io.EOF), true, true},
		{pessimistic.ErrSerialization, true, true},
		{conflict{}, true, true},
		{wrap(pessimistic.ErrLockNotAvailable, io.EOF), false, true},
		{pessimistic.ErrLockTimeout, false, false},
		{cancelled, false, false},
		{errors.Join(conflict{}, context.DeadlineExceeded), false, false},
		{io.EOF, false, false},
	} {
		if got := def.Retry.Retryable(tt.err); got != tt.def {
			t.Errorf("default Retryable(%v) = %v", tt.err, got)
		}
		if got := nw.Retry.Retryable(tt.err); got != tt.nw {
			t.Errorf("RetryLockNotAvailable Retryable(%v) = %v", tt.err, got)
		}
	}
	// Resolve never mutates the caller's struct.
	o := &pessimistic.Options{}
	if _, err := Resolve("p", o); err != nil || o.Retry.Retryable != nil {
		t.Error("Options mutated")
	}
}

func TestResolveBadInput(t *testing.T) {
	for _, o := range []*pessimistic.Options{
		{LockTimeout: -1},
		{LockTimeout: math.MinInt64},
		{Isolation: 42},
		{Retry: retry.Policy{MaxDelay: -1}},
	} {
		_, err := Resolve("pessimisticpg", o)
		if !errors.Is(err, concurkit.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "pessimisticpg: invalid argument: ") {
			t.Errorf("%+v: %v", *o, err)
		}
	}
}

func TestCeilUnits(t *testing.T) {
	for _, tt := range []struct {
		d     time.Duration
		unit  time.Duration
		limit int64
		want  int64
	}{
		{1, time.Millisecond, 10, 1},
		{time.Millisecond, time.Millisecond, 10, 1},
		{time.Millisecond + 1, time.Millisecond, 10, 2},
		{time.Second, time.Millisecond, 10, 10},
		{1<<63 - 1, time.Second, 1 << 40, 9223372037},
	} {
		if got := CeilUnits(tt.d, tt.unit, tt.limit); got != tt.want {
			t.Errorf("CeilUnits(%v, %v, %d) = %d, want %d", tt.d, tt.unit, tt.limit, got, tt.want)
		}
	}
}

// TestLockWait: only a lock statement that ended by the server's lock
// timeout, NOWAIT or the caller's context is reported, with its package,
// table, duration and error.
func TestLockWait(t *testing.T) {
	var got []observe.LockWaitEvent
	hooks := &observe.Hooks{LockWait: func(_ context.Context, e observe.LockWaitEvent) { got = append(got, e) }}
	ctx := observe.WithHooks(context.Background(), hooks)
	start := time.Now().Add(-time.Second)
	timeout := wrap(pessimistic.ErrLockTimeout, io.EOF)
	LockWait(ctx, "pessimisticpg", "accounts", start, nil)
	LockWait(ctx, "pessimisticpg", "accounts", start, io.EOF)
	LockWait(ctx, "pessimisticpg", "accounts", start, wrap(pessimistic.ErrDeadlock, io.EOF))
	LockWait(ctx, "pessimisticpg", "accounts", start, timeout)
	AdvisoryWait(ctx, "pessimisticpg", -42, start, pessimistic.ErrLockNotAvailable)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	LockWait(cctx, "pessimisticmysql", "orders", start, errors.Join(context.Canceled, io.EOF))
	LockWait(cctx, "pessimisticmysql", "orders", start, io.EOF) // not the context's error
	if len(got) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(got), got)
	}
	for i, want := range []observe.LockWaitEvent{
		{Package: "pessimisticpg", Key: "accounts", Attempts: 1, Err: timeout},
		{Package: "pessimisticpg", Key: "-42", Attempts: 1, Err: pessimistic.ErrLockNotAvailable},
		{Package: "pessimisticmysql", Key: "orders", Attempts: 1},
	} {
		e := got[i]
		if e.Package != want.Package || e.Key != want.Key || e.Attempts != 1 || e.Wait < time.Second || (want.Err != nil && e.Err != want.Err) {
			t.Errorf("event %d = %+v, want %+v with Wait >= 1s", i, e, want)
		}
	}
	if observe.ErrorType(got[0].Err) != "lock_timeout" || observe.ErrorType(got[1].Err) != "lock_not_available" || observe.ErrorType(got[2].Err) != "canceled" {
		t.Errorf("error types %q %q %q", observe.ErrorType(got[0].Err), observe.ErrorType(got[1].Err), observe.ErrorType(got[2].Err))
	}
}

// TestLockWaitFreeWithoutHooks: reporting costs no allocation when no
// hooks (or no LockWait callback) are installed.
func TestLockWaitFreeWithoutHooks(t *testing.T) {
	err := wrap(pessimistic.ErrLockTimeout, io.EOF)
	start := time.Now()
	for _, ctx := range []context.Context{context.Background(), observe.WithHooks(context.Background(), &observe.Hooks{})} {
		if n := testing.AllocsPerRun(100, func() {
			LockWait(ctx, "pessimisticpg", "accounts", start, err)
			AdvisoryWait(ctx, "pessimisticpg", 42, start, err)
			LockWait(ctx, "pessimisticpg", "accounts", start, nil)
		}); n != 0 {
			t.Errorf("%v allocations per call without hooks", n)
		}
	}
}
