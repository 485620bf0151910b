package saga_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/saga"
	"github.com/concurkit/concurkit/saga/internal/sagatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type in struct{ N int }

func ok(name string) saga.Step[in] {
	return saga.NewStep(name, func(context.Context, *saga.Call[in]) (string, error) { return name, nil }, nil)
}

func TestNewBadInput(t *testing.T) {
	long := strings.Repeat("x", saga.MaxNameLen+1)
	cases := []struct {
		name    string
		def     string
		version int
		cfg     *saga.Config
		steps   []saga.Step[in]
	}{
		{"empty name", "", 1, nil, []saga.Step[in]{ok("a")}},
		{"long name", long, 1, nil, []saga.Step[in]{ok("a")}},
		{"colon in name", "a:b", 1, nil, []saga.Step[in]{ok("a")}},
		{"control in name", "a\tb", 1, nil, []saga.Step[in]{ok("a")}},
		{"version 0", "d", 0, nil, []saga.Step[in]{ok("a")}},
		{"no steps", "d", 1, nil, nil},
		{"zero step", "d", 1, nil, []saga.Step[in]{{}}},
		{"nil action", "d", 1, nil, []saga.Step[in]{saga.NewStep[in, int]("a", nil, nil)}},
		{"duplicate step", "d", 1, nil, []saga.Step[in]{ok("a"), ok("a")}},
		{"colon in step", "d", 1, nil, []saga.Step[in]{ok("a:b")}},
		{"invalid UTF-8 step", "d", 1, nil, []saga.Step[in]{ok("\xff")}},
		{"negative lease", "d", 1, &saga.Config{LeaseTTL: -time.Second}, []saga.Step[in]{ok("a")}},
		{"bad retry", "d", 1, &saga.Config{Retry: retry.Policy{MaxAttempts: -1}}, []saga.Step[in]{ok("a")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := saga.New(c.def, c.version, c.cfg, c.steps...)
			if !errors.Is(err, concurkit.ErrInvalidArgument) || d != nil {
				t.Fatalf("New: %v, %v", d, err)
			}
		})
	}
	d, err := saga.New("d", 3, nil, ok("a"), ok("b"))
	if err != nil || d.Name() != "d" || d.Version() != 3 {
		t.Fatalf("New: %v %v", d, err)
	}
}

// TestHeartbeatKeepsLease: a step that outlasts LeaseTTL keeps its lease,
// extended in the background, so a second runner is turned away.
func TestHeartbeatKeepsLease(t *testing.T) {
	clock := sagatest.NewClock()
	store := sagatest.NewMemory()
	inStep, release := make(chan struct{}), make(chan struct{})
	d, err := saga.New("slow", 1, &saga.Config{LeaseTTL: time.Minute, Now: clock.Now},
		saga.NewStep("wait", func(ctx context.Context, _ *saga.Call[in]) (int, error) {
			close(inStep)
			<-release
			return 1, nil
		}, nil))
	if err != nil {
		t.Fatal(err)
	}
	saga.SetHeartbeat(d, time.Millisecond)
	done := make(chan error, 1)
	go func() { _, err := d.Run(t.Context(), store, "k", in{}); done <- err }()
	var once sync.Once
	stop := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { stop(); <-done }) // also when the test fails early
	<-inStep
	for range 3 { // 3 × 50 s: the lease of 1 min would have ended twice
		clock.Advance(50 * time.Second)
		waitFor(t, func() bool {
			rec, err := store.Load(t.Context(), "k")
			return err == nil && rec.LeaseUntil.After(clock.Now().Add(30*time.Second))
		})
		if _, err := d.Run(t.Context(), store.Handle(), "k", in{}); !errors.Is(err, saga.ErrInProgress) {
			t.Fatalf("second runner: %v", err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the cleanup
}

// TestLeaseLostCancelsStep: when the lease cannot be extended before it
// ends, or was taken over, the running step's context is cancelled with
// ErrLeaseLost and Run records nothing more.
func TestLeaseLostCancelsStep(t *testing.T) {
	for _, how := range []string{"store unreachable", "taken over"} {
		t.Run(how, func(t *testing.T) {
			clock := sagatest.NewClock()
			mem := sagatest.NewMemory()
			store := mem.Handle()
			inStep := make(chan struct{})
			var cause atomic.Value
			d, err := saga.New("slow", 1, &saga.Config{LeaseTTL: time.Minute, Now: clock.Now},
				saga.NewStep("wait", func(ctx context.Context, _ *saga.Call[in]) (int, error) {
					close(inStep)
					<-ctx.Done()
					cause.Store(context.Cause(ctx))
					return 0, ctx.Err()
				}, nil))
			if err != nil {
				t.Fatal(err)
			}
			saga.SetHeartbeat(d, time.Millisecond)
			var lost, failedExt atomic.Int32
			ctx := observe.WithHooks(t.Context(), &observe.Hooks{
				LeaseLost: func(_ context.Context, e observe.LeaseEvent) {
					if e.Package == "saga" && e.Key == "k" && errors.Is(e.Err, saga.ErrLeaseLost) {
						lost.Add(1)
					}
				},
				LeaseExtend: func(_ context.Context, e observe.LeaseEvent) {
					if e.Err != nil {
						failedExt.Add(1)
					}
				},
			})
			done := make(chan error, 1)
			go func() { _, err := d.Run(ctx, store, "k", in{}); done <- err }()
			<-inStep
			var thief int64
			if how == "store unreachable" {
				store.Kill()
				waitFor(t, func() bool { return failedExt.Load() > 0 }) // extensions fail; the lease still lasts
				clock.Advance(2 * time.Minute)
			} else {
				rec, err := mem.Load(t.Context(), "k")
				if err != nil {
					t.Fatal(err)
				}
				rec.Claim = 42
				rec.LeaseUntil = clock.Now().Add(time.Hour)
				if _, claimed, err := mem.Claim(t.Context(), rec, rec.LeaseUntil); err != nil || !claimed {
					t.Fatalf("steal: %v %v", claimed, err)
				}
				thief = 42
			}
			select {
			case err := <-done:
				if !errors.Is(err, saga.ErrLeaseLost) {
					t.Fatalf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Run did not stop within 20 s of losing its lease")
			}
			if c, _ := cause.Load().(error); !errors.Is(c, saga.ErrLeaseLost) {
				t.Errorf("step context cause: %v", c)
			}
			if lost.Load() != 1 || failedExt.Load() < 1 {
				t.Errorf("hooks: %d lease losses, %d failed extensions", lost.Load(), failedExt.Load())
			}
			rec, err := mem.Load(t.Context(), "k")
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status != saga.Running || rec.Steps[0].Status != saga.StepRunning || (thief != 0 && rec.Claim != thief) {
				t.Errorf("record after the loss: %+v", rec)
			}
		})
	}
}

// hangingExtend is a store whose Extend hangs until its context ends, as
// a statement queued behind a lock or sent to a frozen server does.
type hangingExtend struct{ *sagatest.MemoryStore }

func (h hangingExtend) Extend(ctx context.Context, _ string, _ int64, _ time.Time) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestNoOverlapWhileExtendHangs: runner A's extensions hang; runner B
// retries the instance until A's lease has ended and claims it. A's step
// context must end before A's lease does, so A's step (which stops when
// its context ends) and B's never run at the same time. Real clock, 3 s
// lease.
func TestNoOverlapWhileExtendHangs(t *testing.T) {
	const ttl = 3 * time.Second
	mem := sagatest.NewMemory()
	var mu sync.Mutex
	var spans [2][2]time.Time // [start, end] of A's and B's step execution
	inA := make(chan struct{})
	var calls atomic.Int32
	d, err := saga.New("hang", 1, &saga.Config{LeaseTTL: ttl, Retry: retry.Policy{MaxAttempts: 1}},
		saga.NewStep("step", func(ctx context.Context, _ *saga.Call[in]) (int, error) {
			start := time.Now()
			first := calls.Add(1) == 1
			if first {
				close(inA)
				select {
				case <-ctx.Done():
				case <-time.After(30 * time.Second):
				}
			}
			i := 1
			if first {
				i = 0
			}
			mu.Lock()
			spans[i] = [2]time.Time{start, time.Now()}
			mu.Unlock()
			if first {
				return 0, ctx.Err()
			}
			return 1, nil
		}, nil))
	if err != nil {
		t.Fatal(err)
	}
	aErr := make(chan error, 1)
	go func() { _, err := d.Run(t.Context(), hangingExtend{mem.Handle()}, "k", in{}); aErr <- err }()
	<-inA
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := d.Run(t.Context(), mem.Handle(), "k", in{})
		if err == nil {
			break
		}
		if !errors.Is(err, saga.ErrInProgress) || time.Now().After(deadline) {
			t.Fatalf("runner B: %v", err)
		}
		time.Sleep(time.Millisecond) // polling a wall-clock lease
	}
	if err := <-aErr; !errors.Is(err, saga.ErrLeaseLost) {
		t.Fatalf("runner A: %v, want ErrLeaseLost", err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("step executed %d times, want 2", n)
	}
	a, b := spans[0], spans[1]
	if b[0].Before(a[1]) {
		t.Errorf("runner B's step started %v before runner A's ended: both ran it at once", a[1].Sub(b[0]))
	}
}

// TestPanicReleasesLease: a step that panics releases the lease on the way
// out; the panic reaches the caller and the step runs again next time.
func TestPanicReleasesLease(t *testing.T) {
	store := sagatest.NewMemory()
	var calls atomic.Int32
	d, err := saga.New("p", 1, nil, saga.NewStep("boom", func(context.Context, *saga.Call[in]) (int, error) {
		if calls.Add(1) == 1 {
			panic("bug")
		}
		return 1, nil
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != "bug" {
				t.Errorf("recovered %v", r)
			}
		}()
		_, _ = d.Run(t.Context(), store, "k", in{})
	}()
	rec, err := store.Load(t.Context(), "k")
	if err != nil || !rec.LeaseUntil.IsZero() || rec.Steps[0].Status != saga.StepRunning {
		t.Fatalf("after panic: %+v %v", rec, err)
	}
	if _, err := d.Run(t.Context(), store, "k", in{}); err != nil || calls.Load() != 2 {
		t.Fatalf("rerun: %v, %d calls", err, calls.Load())
	}
}

// TestOutputNotEncodable: an output json cannot encode is a bug in the
// definition: Run reports it without failing (or completing) the step.
func TestOutputNotEncodable(t *testing.T) {
	store := sagatest.NewMemory()
	var undo atomic.Int32
	d, err := saga.New("enc", 1, nil,
		saga.NewStep("a", func(context.Context, *saga.Call[in]) (int, error) { return 1, nil },
			func(context.Context, *saga.Call[in], int) error { undo.Add(1); return nil }),
		saga.NewStep("b", func(context.Context, *saga.Call[in]) (func(), error) { return func() {}, nil }, nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Run(t.Context(), store, "k", in{})
	if !errors.Is(err, concurkit.ErrInvalidArgument) || errors.Is(err, saga.ErrCompensated) {
		t.Fatalf("Run: %v", err)
	}
	rec, _ := store.Load(t.Context(), "k")
	if rec.Status != saga.Running || rec.Steps[1].Status != saga.StepRunning || undo.Load() != 0 {
		t.Errorf("record %+v, %d compensations", rec, undo.Load())
	}
}

// TestNothingToCompensate: a first step that fails, and steps without
// compensation, end Compensated.
func TestNothingToCompensate(t *testing.T) {
	errNo := errors.New("no")
	fail := saga.NewStep("fail", func(context.Context, *saga.Call[in]) (int, error) { return 0, errNo }, nil)
	for _, tc := range []struct {
		name  string
		steps []saga.Step[in]
		want  []saga.StepStatus
	}{
		{"first step fails", []saga.Step[in]{fail, ok("b")}, []saga.StepStatus{saga.StepFailed, saga.StepPending}},
		{"no compensations", []saga.Step[in]{ok("a"), ok("b"), fail}, []saga.StepStatus{saga.StepCompensated, saga.StepCompensated, saga.StepFailed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := sagatest.NewMemory()
			d, err := saga.New("n", 1, &saga.Config{Retry: retry.Policy{MaxAttempts: 1}}, tc.steps...)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Run(t.Context(), store, "k", in{})
			var fe *saga.FailedError
			if !errors.As(err, &fe) || !errors.Is(err, saga.ErrCompensated) || !errors.Is(err, errNo) || fe.Step != "fail" {
				t.Fatalf("Run: %v", err)
			}
			rec, _ := store.Load(t.Context(), "k")
			for i, s := range rec.Steps {
				if s.Status != tc.want[i] {
					t.Errorf("step %d: %s, want %s", i, s.Status, tc.want[i])
				}
			}
			if rec.Status != saga.Compensated || !rec.LeaseUntil.IsZero() {
				t.Errorf("record %+v", rec)
			}
		})
	}
}

// TestRetriesObserved: retried attempts of an action are reported to the
// observe hooks; Retryable marks an error retryable.
func TestRetriesObserved(t *testing.T) {
	if saga.Retryable(nil) != nil {
		t.Error("Retryable(nil) != nil")
	}
	errFlaky := errors.New("flaky")
	if !retry.IsRetryable(saga.Retryable(errFlaky)) || !errors.Is(saga.Retryable(errFlaky), errFlaky) || saga.Retryable(errFlaky).Error() != "flaky" {
		t.Error("Retryable does not wrap")
	}
	var n atomic.Int32
	d, err := saga.New("r", 1, &saga.Config{Retry: retry.Policy{BaseDelay: time.Microsecond}},
		saga.NewStep("a", func(context.Context, *saga.Call[in]) (int, error) {
			if n.Add(1) < 3 {
				return 0, saga.Retryable(errFlaky)
			}
			return 7, nil
		}, nil))
	if err != nil {
		t.Fatal(err)
	}
	var retries atomic.Int32
	ctx := observe.WithHooks(t.Context(), &observe.Hooks{Retry: func(_ context.Context, e observe.RetryEvent) {
		if errors.Is(e.Err, errFlaky) {
			retries.Add(1)
		}
	}})
	res, err := d.Run(ctx, sagatest.NewMemory(), "k", in{})
	var out int
	if err != nil || res.Output("a", &out) != nil || out != 7 || retries.Load() != 2 {
		t.Fatalf("Run: %v, output %d, %d retries observed", err, out, retries.Load())
	}
}

func TestFailedError(t *testing.T) {
	base := errors.New("declined")
	e := &saga.FailedError{Key: "k", Step: "pay", Err: base}
	if !errors.Is(e, saga.ErrCompensated) || errors.Is(e, saga.ErrCompensationFailed) || !errors.Is(e, base) || observe.ErrorType(e) != "compensated" {
		t.Errorf("compensated: %v", e)
	}
	if got := e.Error(); got != `saga: k: step "pay" failed: declined; completed steps compensated` {
		t.Errorf("Error() = %q", got)
	}
	down := errors.New("down")
	e.CompensationStep, e.CompensationErr = "reserve", down
	if errors.Is(e, saga.ErrCompensated) || !errors.Is(e, saga.ErrCompensationFailed) || !errors.Is(e, down) || !errors.Is(e, base) ||
		observe.ErrorType(fmt.Errorf("wrapped: %w", e)) != "compensation_failed" {
		t.Errorf("compensation failed: %v", e)
	}
	for err, want := range map[error]string{
		saga.ErrInProgress: "in_progress", saga.ErrLeaseLost: "lease_lost", saga.ErrNotFound: "not_found",
		saga.ErrDefinitionMismatch: "definition_mismatch", saga.ErrInputMismatch: "input_mismatch",
	} {
		if got := observe.ErrorType(err); got != want {
			t.Errorf("ErrorType(%v) = %q, want %q", err, got, want)
		}
	}
}

// TestConcurrentKeys: many instances of one definition run at once on one
// store (the race detector watches the runner's state).
func TestConcurrentKeys(t *testing.T) {
	store := sagatest.NewMemory()
	d, err := saga.New("c", 1, nil, ok("a"), ok("b"), ok("c"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if _, err := d.Run(t.Context(), store, fmt.Sprint("k", i), in{N: i}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 20 s")
		}
		time.Sleep(time.Millisecond)
	}
}
