package observe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/concurkit/concurkit/observe"
)

func TestNilHooksAreNoOps(t *testing.T) {
	ctx := t.Context()
	h := observe.FromContext(ctx)
	if h != nil {
		t.Fatalf("FromContext of a bare context = %v, want nil", h)
	}
	// Every method must be callable on nil and on empty hooks.
	for _, h := range []*observe.Hooks{nil, {}} {
		h.OnRetry(ctx, observe.RetryEvent{})
		h.OnLockWait(ctx, observe.LockWaitEvent{})
		h.OnLeaseExtend(ctx, observe.LeaseEvent{})
		h.OnLeaseLost(ctx, observe.LeaseEvent{})
		h.OnFenceRejected(ctx, observe.FenceEvent{})
		h.OnConflict(ctx, observe.ConflictEvent{})
	}
	if got := observe.WithHooks(ctx, nil); got != ctx {
		t.Fatal("WithHooks(ctx, nil) did not return ctx")
	}
}

func TestWithHooksComposes(t *testing.T) {
	var calls []string
	rec := func(name string) *observe.Hooks {
		return &observe.Hooks{
			Retry:    func(context.Context, observe.RetryEvent) { calls = append(calls, name+".retry") },
			Conflict: func(context.Context, observe.ConflictEvent) { calls = append(calls, name+".conflict") },
		}
	}
	onlyLost := &observe.Hooks{LeaseLost: func(context.Context, observe.LeaseEvent) { calls = append(calls, "c.lost") }}
	ctx := observe.WithHooks(t.Context(), rec("a"))
	ctx = observe.WithHooks(ctx, rec("b"))
	ctx = observe.WithHooks(ctx, onlyLost)
	h := observe.FromContext(ctx)
	h.OnRetry(ctx, observe.RetryEvent{})
	h.OnConflict(ctx, observe.ConflictEvent{})
	h.OnLeaseLost(ctx, observe.LeaseEvent{})
	h.OnFenceRejected(ctx, observe.FenceEvent{}) // nobody listens
	got := strings.Join(calls, " ")
	if want := "a.retry b.retry a.conflict b.conflict c.lost"; got != want {
		t.Fatalf("calls %q, want %q", got, want)
	}
}

type typedErr struct{}

func (typedErr) Error() string     { return "typed" }
func (typedErr) ErrorType() string { return "conflict" }

func TestErrorType(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("x"), "_OTHER"},
		{fmt.Errorf("wrapped: %w", typedErr{}), "conflict"},
		{errors.Join(errors.New("x"), context.Canceled), "canceled"},
		{fmt.Errorf("op: %w", context.DeadlineExceeded), "deadline_exceeded"},
	} {
		if got := observe.ErrorType(tc.err); got != tc.want {
			t.Errorf("ErrorType(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestSlog(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := observe.Slog(logger)
	ctx := t.Context()
	boom := errors.New("boom")
	h.OnRetry(ctx, observe.RetryEvent{Package: "retry", Attempt: 2, Err: boom, Delay: time.Millisecond})
	h.OnRetry(ctx, observe.RetryEvent{Package: "retry", Attempt: 10, Err: boom, GaveUp: true})
	h.OnLockWait(ctx, observe.LockWaitEvent{Package: "redislock", Key: "k", Wait: time.Second, Attempts: 3})
	h.OnLeaseExtend(ctx, observe.LeaseEvent{Package: "etcdlock", Key: "k", Token: 7, Err: boom})
	h.OnLeaseLost(ctx, observe.LeaseEvent{Package: "etcdlock", Key: "k", Token: 7, Err: boom})
	h.OnFenceRejected(ctx, observe.FenceEvent{Package: "fencedpg", Resource: "accounts", Token: 5, Seen: 6})
	h.OnConflict(ctx, observe.ConflictEvent{Package: "optimisticpg", Table: "accounts"})
	out := buf.String()
	for _, want := range []string{
		`level=DEBUG msg="concurkit: retrying" package=retry attempt=2 delay=1ms error=boom`,
		`level=WARN msg="concurkit: retry budget used up" package=retry attempt=10`,
		`level=DEBUG msg="concurkit: waited for lock" package=redislock key=k wait=1s attempts=3 acquired=true`,
		`level=WARN msg="concurkit: lease extension failed" package=etcdlock key=k token=7 error=boom`,
		`level=WARN msg="concurkit: lease lost" package=etcdlock key=k token=7 cause=boom`,
		`level=WARN msg="concurkit: stale fencing token rejected" package=fencedpg resource=accounts token=5 seen=6`,
		`level=DEBUG msg="concurkit: version conflict" package=optimisticpg table=accounts`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// BenchmarkUnused measures what an emitting site costs when no hooks are
// installed: one context lookup and a nil check.
func BenchmarkUnused(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx = context.WithValue(ctx, struct{ k int }{1}, 1) // a typical chain of a few values
	b.ReportAllocs()
	for b.Loop() {
		observe.FromContext(ctx).OnConflict(ctx, observe.ConflictEvent{Package: "optimisticpg", Table: "t"})
	}
}
