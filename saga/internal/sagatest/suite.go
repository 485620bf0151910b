package sagatest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/saga"
)

// Harness is one store on one database, with a fresh table (the toolkit
// migration applied to an isolated schema or database) and the suite's
// effects table: CREATE TABLE saga_effects (effect_key PRIMARY KEY,
// applied INT) — see EffectsDDL.
type Harness struct {
	// Store returns a store on a new pooled handle to the table.
	Store func(t *testing.T) saga.Store
	// Crashable returns a store on one connection of its own, and a
	// function that kills that connection on the server
	// (pg_terminate_backend, KILL): every later call of the store fails.
	Crashable func(t *testing.T) (saga.Store, func())
	// Effect applies the outside effect named key at most once: an
	// insert-if-absent into saga_effects (a repeat counts in applied).
	Effect func(ctx context.Context, key string) error
	// Effects lists the effect keys applied, sorted.
	Effects func(ctx context.Context) ([]string, error)
	// Load reads an instance (saga.ErrNotFound if none).
	Load func(ctx context.Context, key string) (*saga.Record, error)
	// Unfinished lists the instances a recovery job would resume at now.
	Unfinished func(ctx context.Context, now time.Time, limit int) ([]*saga.Record, error)
	// LockRow locks the row of instance key from another transaction
	// (SELECT … FOR UPDATE), so that the stores' writes of it wait, and
	// returns its lease end read under the lock, and the function that
	// releases the lock (idempotent; also called at cleanup).
	LockRow func(t *testing.T, key string) (leaseUntil time.Time, unlock func())
}

// EffectsDDL creates the suite's effects table, per dialect.
const (
	EffectsDDLPostgres = `CREATE TABLE saga_effects (effect_key text PRIMARY KEY, applied int NOT NULL DEFAULT 1)`
	EffectsDDLMySQL    = `CREATE TABLE saga_effects (effect_key VARBINARY(300) PRIMARY KEY, applied INT NOT NULL DEFAULT 1) ENGINE=InnoDB`
)

// Run runs every test of the suite, each on a fresh harness.
func Run(t *testing.T, newHarness func(t *testing.T) *Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *Harness)
	}{
		{"CompletesAndReplays", CompletesAndReplays},
		{"FailureCompensatesInReverseOnce", FailureCompensatesInReverseOnce},
		{"CompensationResumedAfterKill", CompensationResumedAfterKill},
		{"CompensationResumedAfterCancel", CompensationResumedAfterCancel},
		{"CompensationKeepsFailing", CompensationKeepsFailing},
		{"CrashBetweenActionAndRecord", CrashBetweenActionAndRecord},
		{"CancelBetweenActionAndRecord", CancelBetweenActionAndRecord},
		{"ConcurrentRunners", ConcurrentRunners},
		{"ConcurrentResume", ConcurrentResume},
		{"ClaimIsExclusive", ClaimIsExclusive},
		{"LeaseTakeoverFencesOldRunner", LeaseTakeoverFencesOldRunner},
		{"RetryableErrorRetriesStep", RetryableErrorRetriesStep},
		{"DefinitionAndInputMismatch", DefinitionAndInputMismatch},
		{"BadInputWritesNothing", BadInputWritesNothing},
		{"AwkwardValues", AwkwardValues},
		{"StepEndsWithLeaseWhileExtendBlocked", StepEndsWithLeaseWhileExtendBlocked},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newHarness(t)) })
	}
}

// Clock is a manual clock for leases.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at a fixed instant (microseconds only, like the
// databases).
func NewClock() *Clock { return &Clock{t: time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// Order is the suite's saga input.
type Order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// Out is every step's output.
type Out struct {
	Step  string `json:"step"`
	Order string `json:"order"`
}

// TTL is the suite's lease: long enough that no real-time heartbeat or
// expiry happens during a test; the manual clock passes it.
const TTL = time.Minute

// hook runs inside an action or compensation: n counts its calls (from 1)
// and apply applies the step's effect. It returns the step's error. The
// default is apply().
type hook func(ctx context.Context, c *saga.Call[Order], n int, apply func() error) error

// fixture is a four-step saga whose actions apply effects "<key>:<step>"
// and whose compensations apply "<key>:<step>:undo", counting calls.
type fixture struct {
	t     *testing.T
	h     *Harness
	clock *Clock
	mu    sync.Mutex
	calls map[string]int // "do s1", "undo s1"
	log   []string       // calls in order
	hooks map[string]hook
}

func newFixture(t *testing.T, h *Harness) *fixture {
	return &fixture{t: t, h: h, clock: NewClock(), calls: map[string]int{}, hooks: map[string]hook{}}
}

func (f *fixture) count(what string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[what]++
	f.log = append(f.log, what)
	return f.calls[what]
}

func (f *fixture) n(what string) int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls[what] }

func (f *fixture) undos() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.log {
		if strings.HasPrefix(s, "undo ") {
			out = append(out, s)
		}
	}
	return out
}

func (f *fixture) run(what string, ctx context.Context, c *saga.Call[Order], effect string) error {
	n := f.count(what)
	apply := func() error { return f.h.Effect(ctx, effect) }
	f.mu.Lock()
	h := f.hooks[what]
	f.mu.Unlock()
	if h == nil {
		return apply()
	}
	return h(ctx, c, n, apply)
}

func (f *fixture) on(what string, h hook) { f.mu.Lock(); f.hooks[what] = h; f.mu.Unlock() }

// step returns step name of the fixture's saga.
func (f *fixture) step(name string) saga.Step[Order] {
	return saga.NewStep(name,
		func(ctx context.Context, c *saga.Call[Order]) (Out, error) {
			if want := c.SagaKey + ":" + name; c.Key != want || c.Step != name {
				return Out{}, fmt.Errorf("call key %q step %q, want %q", c.Key, c.Step, want)
			}
			if name != "s1" {
				var prev Out
				if err := c.Output("s1", &prev); err != nil || prev.Step != "s1" {
					return Out{}, fmt.Errorf("output of s1 in %s: %+v %v", name, prev, err)
				}
			}
			if err := f.run("do "+name, ctx, c, c.Key); err != nil {
				return Out{}, err
			}
			return Out{Step: name, Order: c.Input.ID}, nil
		},
		func(ctx context.Context, c *saga.Call[Order], out Out) error {
			if out.Step != name || out.Order != c.Input.ID {
				return fmt.Errorf("compensation of %s got output %+v", name, out)
			}
			return f.run("undo "+name, ctx, c, c.Key+":undo")
		})
}

// def returns the four-step definition (version 1 unless given).
func (f *fixture) def(version int, retries int) *saga.Definition[Order] {
	f.t.Helper()
	d, err := saga.New("order", version, &saga.Config{
		LeaseTTL: TTL, Now: f.clock.Now,
		Retry: retry.Policy{MaxAttempts: retries, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond},
	}, f.step("s1"), f.step("s2"), f.step("s3"), f.step("s4"))
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func (f *fixture) effects(want ...string) {
	f.t.Helper()
	got, err := f.h.Effects(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		f.t.Errorf("effects applied: %q, want %q", got, want)
	}
}

func (f *fixture) status(key string, want saga.Status, steps ...saga.StepStatus) *saga.Record {
	f.t.Helper()
	rec, err := f.h.Load(f.t.Context(), key)
	if err != nil {
		f.t.Fatal(err)
	}
	var got []saga.StepStatus
	for _, s := range rec.Steps {
		got = append(got, s.Status)
	}
	if rec.Status != want || !slices.Equal(got, steps) {
		f.t.Errorf("%s: status %s %v, want %s %v", key, rec.Status, got, want, steps)
	}
	return rec
}

var errBoom = errors.New("boom: card declined")

const (
	pending     = saga.StepPending
	running     = saga.StepRunning
	done        = saga.StepDone
	failed      = saga.StepFailed
	compensated = saga.StepCompensated
)

// CompletesAndReplays: a saga runs its four steps once; a retry returns the
// stored outputs without calling anything, on another handle too.
func CompletesAndReplays(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	d := f.def(1, 1)
	ctx := t.Context()
	res, err := d.Run(ctx, h.Store(t), "o1", Order{ID: "o1", Amount: 5})
	if err != nil || res.Replayed {
		t.Fatalf("Run: %+v %v", res, err)
	}
	for i := range 2 {
		again, err := d.Run(ctx, h.Store(t), "o1", Order{ID: "o1", Amount: 5})
		if err != nil || !again.Replayed {
			t.Fatalf("retry %d: %+v %v", i, again, err)
		}
		for _, s := range []string{"s1", "s2", "s3", "s4"} {
			var a, b Out
			if err := res.Output(s, &a); err != nil {
				t.Fatal(err)
			}
			if err := again.Output(s, &b); err != nil || a != b || a != (Out{Step: s, Order: "o1"}) {
				t.Errorf("output %s: first %+v, replay %+v (%v)", s, a, b, err)
			}
		}
	}
	for _, s := range []string{"s1", "s2", "s3", "s4"} {
		if n := f.n("do " + s); n != 1 {
			t.Errorf("action %s ran %d times, want 1", s, n)
		}
	}
	if err := res.Output("nope", new(Out)); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Output of an unknown step: %v", err)
	}
	rec := f.status("o1", saga.Completed, done, done, done, done)
	if !rec.LeaseUntil.IsZero() {
		t.Errorf("completed instance keeps a lease until %v", rec.LeaseUntil)
	}
	if string(rec.Input) == "" || rec.Definition != "order" || rec.Version != 1 {
		t.Errorf("record: %+v", rec)
	}
	f.effects("o1:s1", "o1:s2", "o1:s3", "o1:s4")
}

// FailureCompensatesInReverseOnce: step 3 of 4 fails permanently; the
// compensations of steps 2 and 1 run once each, in that order; step 4 never
// runs; a retry returns the stored failure and calls nothing.
func FailureCompensatesInReverseOnce(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	f.on("do s3", func(context.Context, *saga.Call[Order], int, func() error) error { return errBoom })
	d := f.def(1, 3)
	ctx := t.Context()
	_, err := d.Run(ctx, h.Store(t), "o2", Order{ID: "o2"})
	var fe *saga.FailedError
	if !errors.As(err, &fe) || !errors.Is(err, saga.ErrCompensated) || !errors.Is(err, errBoom) || fe.Step != "s3" {
		t.Fatalf("Run: %v", err)
	}
	if errors.Is(err, saga.ErrCompensationFailed) {
		t.Errorf("compensated saga matches ErrCompensationFailed: %v", err)
	}
	if n := f.n("do s3"); n != 1 {
		t.Errorf("permanent failure tried %d times, want 1", n)
	}
	for i := range 2 {
		_, err = d.Run(ctx, h.Store(t), "o2", Order{ID: "o2"})
		if !errors.As(err, &fe) || !errors.Is(err, saga.ErrCompensated) || fe.Step != "s3" || !strings.Contains(err.Error(), errBoom.Error()) {
			t.Fatalf("retry %d: %v", i, err)
		}
	}
	if got := f.undos(); !slices.Equal(got, []string{"undo s2", "undo s1"}) {
		t.Errorf("compensations %q, want [undo s2 undo s1]", got)
	}
	if f.n("do s4") != 0 || f.n("undo s3") != 0 || f.n("do s1") != 1 || f.n("do s2") != 1 {
		t.Errorf("calls %v", f.calls)
	}
	rec := f.status("o2", saga.Compensated, compensated, compensated, failed, pending)
	if rec.Error != errBoom.Error() || rec.Steps[2].Error != errBoom.Error() {
		t.Errorf("stored errors %q / %q", rec.Error, rec.Steps[2].Error)
	}
	f.effects("o2:s1", "o2:s2", "o2:s1:undo", "o2:s2:undo")
}

// CompensationResumedAfterKill: the runner's connection is killed after
// step 2's compensation was recorded, while step 1's compensation runs (its
// effect applied, not recorded); after the lease expires a second runner
// compensates step 1 again with the same key (its effect stays once) and
// never step 2.
func CompensationResumedAfterKill(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	st, kill := h.Crashable(t)
	f.on("do s3", func(context.Context, *saga.Call[Order], int, func() error) error { return errBoom })
	f.on("undo s1", func(_ context.Context, _ *saga.Call[Order], n int, apply func() error) error {
		if err := apply(); err != nil {
			return err
		}
		if n == 1 {
			kill()
		}
		return nil
	})
	d := f.def(1, 3)
	ctx := t.Context()
	_, err := d.Run(ctx, st, "o3", Order{ID: "o3"})
	if !errors.Is(err, saga.ErrCompensationFailed) {
		t.Fatalf("Run with its connection killed: %v", err)
	}
	f.status("o3", saga.Compensating, done, compensated, failed, pending)
	other := h.Store(t)
	if _, err := d.Run(ctx, other, "o3", Order{ID: "o3"}); !errors.Is(err, saga.ErrInProgress) {
		t.Fatalf("Run while the dead runner's lease lasts: %v", err)
	}
	f.clock.Advance(TTL + time.Second)
	// The action's error comes back as its stored message: the run that
	// failed the step is gone.
	_, err = d.Run(ctx, other, "o3", Order{ID: "o3"})
	if !errors.Is(err, saga.ErrCompensated) || !strings.Contains(err.Error(), errBoom.Error()) {
		t.Fatalf("resumed Run: %v", err)
	}
	if got := f.undos(); !slices.Equal(got, []string{"undo s2", "undo s1", "undo s1"}) {
		t.Errorf("compensations %q, want step 2 once, step 1 again after the kill", got)
	}
	f.status("o3", saga.Compensated, compensated, compensated, failed, pending)
	f.effects("o3:s1", "o3:s2", "o3:s1:undo", "o3:s2:undo")
}

// CompensationResumedAfterCancel: the runner is stopped (its context
// cancelled) after step 2's compensation, before step 1's took effect; it
// releases its lease, and the next Run compensates step 1 only.
func CompensationResumedAfterCancel(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	f.on("do s3", func(context.Context, *saga.Call[Order], int, func() error) error { return errBoom })
	ctx, cancel := context.WithCancel(t.Context())
	f.on("undo s1", func(c context.Context, _ *saga.Call[Order], n int, apply func() error) error {
		if n == 1 {
			cancel()
			return c.Err()
		}
		return apply()
	})
	d := f.def(1, 3)
	_, err := d.Run(ctx, h.Store(t), "o4", Order{ID: "o4"})
	if !errors.Is(err, saga.ErrCompensationFailed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Run: %v", err)
	}
	rec := f.status("o4", saga.Compensating, done, compensated, failed, pending)
	if !rec.LeaseUntil.IsZero() {
		t.Errorf("cancelled runner kept its lease until %v", rec.LeaseUntil)
	}
	if rec.Steps[0].Error != "" {
		t.Errorf("cancellation stored as a compensation failure: %q", rec.Steps[0].Error)
	}
	if _, err := d.Run(t.Context(), h.Store(t), "o4", Order{ID: "o4"}); !errors.Is(err, saga.ErrCompensated) {
		t.Fatalf("resumed Run: %v", err)
	}
	if got := f.undos(); !slices.Equal(got, []string{"undo s2", "undo s1", "undo s1"}) {
		t.Errorf("compensations %q", got)
	}
	f.effects("o4:s1", "o4:s2", "o4:s1:undo", "o4:s2:undo")
}

// CompensationKeepsFailing: a compensation that fails through its retries
// leaves the saga Compensating with the error stored; later Runs retry that
// compensation (never the one recorded, never skipping it) until it
// succeeds.
func CompensationKeepsFailing(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	f.on("do s3", func(context.Context, *saga.Call[Order], int, func() error) error { return errBoom })
	var healthy atomic.Bool
	errDown := errors.New("refund service down")
	f.on("undo s1", func(_ context.Context, _ *saga.Call[Order], _ int, apply func() error) error {
		if !healthy.Load() {
			return errDown
		}
		return apply()
	})
	d := f.def(1, 2)
	ctx := t.Context()
	for i := range 2 {
		_, err := d.Run(ctx, h.Store(t), "o5", Order{ID: "o5"})
		var fe *saga.FailedError
		if !errors.As(err, &fe) || !errors.Is(err, saga.ErrCompensationFailed) || !errors.Is(err, errDown) || fe.CompensationStep != "s1" {
			t.Fatalf("Run %d: %v", i, err)
		}
		rec := f.status("o5", saga.Compensating, done, compensated, failed, pending)
		if !strings.Contains(rec.Steps[0].Error, errDown.Error()) || rec.Error != rec.Steps[0].Error || !rec.LeaseUntil.IsZero() {
			t.Errorf("Run %d: stored %q / %q, lease %v", i, rec.Steps[0].Error, rec.Error, rec.LeaseUntil)
		}
	}
	if n := f.n("undo s1"); n != 4 {
		t.Errorf("compensation of s1 called %d times, want 2 runs × 2 attempts", n)
	}
	healthy.Store(true)
	if _, err := d.Run(ctx, h.Store(t), "o5", Order{ID: "o5"}); !errors.Is(err, saga.ErrCompensated) || !strings.Contains(err.Error(), errBoom.Error()) {
		t.Fatalf("Run after recovery: %v", err)
	}
	if f.n("undo s2") != 1 || f.n("undo s1") != 5 {
		t.Errorf("calls %v", f.calls)
	}
	f.status("o5", saga.Compensated, compensated, compensated, failed, pending)
	f.effects("o5:s1", "o5:s2", "o5:s1:undo", "o5:s2:undo")
}

// CrashBetweenActionAndRecord: the runner's connection is killed after step
// 2's action took effect, before it was recorded. The dead runner's lease
// holds the instance until it expires; then a recovery job finds it, and a
// second runner runs step 2 again with the same key (the effect stays
// once) and completes.
func CrashBetweenActionAndRecord(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	st, kill := h.Crashable(t)
	var attempts []int
	f.on("do s2", func(_ context.Context, c *saga.Call[Order], n int, apply func() error) error {
		f.mu.Lock()
		attempts = append(attempts, c.Attempt)
		f.mu.Unlock()
		if err := apply(); err != nil {
			return err
		}
		if n == 1 {
			kill()
		}
		return nil
	})
	d := f.def(1, 1)
	ctx := t.Context()
	if _, err := d.Run(ctx, st, "o6", Order{ID: "o6"}); err == nil || errors.Is(err, saga.ErrCompensated) || errors.Is(err, saga.ErrCompensationFailed) {
		t.Fatalf("Run with its connection killed: %v", err)
	}
	f.status("o6", saga.Running, done, running, pending, pending)
	list := func() []string {
		t.Helper()
		recs, err := h.Unfinished(ctx, f.clock.Now(), 10)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, r := range recs {
			keys = append(keys, r.Key)
		}
		return keys
	}
	if got := list(); len(got) != 0 {
		t.Errorf("Unfinished while the lease lasts: %q", got)
	}
	other := h.Store(t)
	if _, err := d.Run(ctx, other, "o6", Order{ID: "o6"}); !errors.Is(err, saga.ErrInProgress) {
		t.Fatalf("Run while the dead runner's lease lasts: %v", err)
	}
	f.clock.Advance(TTL + time.Second)
	if got := list(); !slices.Equal(got, []string{"o6"}) {
		t.Errorf("Unfinished after the lease: %q", got)
	}
	res, err := d.Run(ctx, other, "o6", Order{ID: "o6"})
	if err != nil || res.Replayed {
		t.Fatalf("resumed Run: %+v %v", res, err)
	}
	if f.n("do s1") != 1 || f.n("do s2") != 2 || f.n("do s3") != 1 || f.n("do s4") != 1 {
		t.Errorf("calls %v: want s2 run again, every other step once", f.calls)
	}
	if !slices.Equal(attempts, []int{1, 2}) {
		t.Errorf("Call.Attempt of s2: %v, want [1 2]", attempts)
	}
	rec := f.status("o6", saga.Completed, done, done, done, done)
	if rec.Steps[1].Attempts != 2 || rec.Steps[0].Attempts != 1 {
		t.Errorf("attempts %+v", rec.Steps)
	}
	if got := list(); len(got) != 0 {
		t.Errorf("Unfinished after completion: %q", got)
	}
	f.effects("o6:s1", "o6:s2", "o6:s3", "o6:s4")
}

// CancelBetweenActionAndRecord: the runner's context ends after step 2's
// action took effect, before it was recorded: Run returns the
// cancellation, the instance is not compensated, and the next Run
// completes it with every effect once.
func CancelBetweenActionAndRecord(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	ctx, cancel := context.WithCancel(t.Context())
	f.on("do s2", func(_ context.Context, _ *saga.Call[Order], n int, apply func() error) error {
		if err := apply(); err != nil {
			return err
		}
		if n == 1 {
			cancel()
		}
		return nil
	})
	d := f.def(1, 1)
	_, err := d.Run(ctx, h.Store(t), "o7", Order{ID: "o7"})
	if !errors.Is(err, context.Canceled) || errors.Is(err, saga.ErrCompensated) || errors.Is(err, saga.ErrCompensationFailed) {
		t.Fatalf("cancelled Run: %v", err)
	}
	rec, err := h.Load(t.Context(), "o7")
	if err != nil || rec.Status != saga.Running || !rec.LeaseUntil.IsZero() {
		t.Fatalf("after cancel: %+v %v (want running, lease released)", rec, err)
	}
	if _, err := d.Run(t.Context(), h.Store(t), "o7", Order{ID: "o7"}); err != nil {
		t.Fatalf("resumed Run: %v", err)
	}
	if f.n("do s1") != 1 || f.n("do s2") > 2 || f.n("do s3") != 1 || f.n("do s4") != 1 {
		t.Errorf("calls %v", f.calls)
	}
	f.status("o7", saga.Completed, done, done, done, done)
	f.effects("o7:s1", "o7:s2", "o7:s3", "o7:s4")
}

// ConcurrentRunners: eight runners on their own connections start the same
// instance at once; one claims it and the others get ErrInProgress while it
// runs (step 1 waits for all of them to have been turned away), then the
// stored result. Each action runs exactly once.
func ConcurrentRunners(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	race(t, h, f, "o8", "do s1")
	for _, s := range []string{"s1", "s2", "s3", "s4"} {
		if n := f.n("do " + s); n != 1 {
			t.Errorf("action %s ran %d times, want 1", s, n)
		}
	}
	f.effects("o8:s1", "o8:s2", "o8:s3", "o8:s4")
}

// ConcurrentResume: an instance interrupted in step 2 (its runner's
// context cancelled, the lease released) is resumed by eight runners at
// once, as recovery jobs on several hosts would: the claim of an existing
// row with a free lease is as exclusive as the insert of a new one. One
// runs step 2 again and completes; the others are turned away.
func ConcurrentResume(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	ctx, cancel := context.WithCancel(t.Context())
	f.on("do s2", func(c context.Context, _ *saga.Call[Order], n int, apply func() error) error {
		if n == 1 {
			cancel()
			return c.Err()
		}
		return apply()
	})
	if _, err := f.def(1, 1).Run(ctx, h.Store(t), "o12", Order{ID: "o12"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Run: %v", err)
	}
	if rec := f.status("o12", saga.Running, done, running, pending, pending); !rec.LeaseUntil.IsZero() {
		t.Fatalf("the cancelled runner kept its lease until %v", rec.LeaseUntil)
	}
	race(t, h, f, "o12", "do s2")
	if f.n("do s1") != 1 || f.n("do s2") != 2 || f.n("do s3") != 1 || f.n("do s4") != 1 {
		t.Errorf("calls %v: want s2 twice (the interrupted run and one resumer), every other step once", f.calls)
	}
	f.effects("o12:s1", "o12:s2", "o12:s3", "o12:s4")
}

// race runs eight runners of f's definition on key at once, each on its own
// store, and checks that one ran it and the seven others were turned away
// (ErrInProgress) while it ran: the action gate waits until all seven have
// been turned away before it applies its effect.
func race(t *testing.T, h *Harness, f *fixture, key, gate string) {
	t.Helper()
	const runners = 8
	var turnedAway atomic.Int32
	allAway := make(chan struct{})
	f.on(gate, func(ctx context.Context, _ *saga.Call[Order], _ int, apply func() error) error {
		select {
		case <-allAway:
		case <-time.After(20 * time.Second):
			return errors.New("the other runners were not turned away within 20 s")
		case <-ctx.Done():
			return ctx.Err()
		}
		return apply()
	})
	d := f.def(1, 1)
	stores := make([]saga.Store, runners)
	for i := range stores {
		stores[i] = h.Store(t)
	}
	start := make(chan struct{})
	finished := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	results := make([]*saga.Result, runners)
	errs := make([]error, runners)
	for i := range runners {
		wg.Go(func() {
			<-start
			away := false
			for {
				res, err := d.Run(t.Context(), stores[i], key, Order{ID: key})
				if errors.Is(err, saga.ErrInProgress) {
					if !away {
						away = true
						if turnedAway.Add(1) == runners-1 {
							close(allAway)
						}
					}
					// Bounded, so that a broken claim fails the test
					// instead of hanging it.
					select {
					case <-finished:
					case <-time.After(30 * time.Second):
						errs[i] = errors.New("no runner finished within 30 s")
						return
					}
					continue
				}
				results[i], errs[i] = res, err
				once.Do(func() { close(finished) })
				return
			}
		})
	}
	close(start)
	wg.Wait()
	fresh := 0
	for i := range runners {
		if errs[i] != nil {
			t.Fatalf("runner %d: %v", i, errs[i])
		}
		if !results[i].Replayed {
			fresh++
		}
		var out Out
		if err := results[i].Output("s4", &out); err != nil || out != (Out{Step: "s4", Order: key}) {
			t.Errorf("runner %d: output %+v %v", i, out, err)
		}
	}
	if fresh != 1 || turnedAway.Load() != runners-1 {
		t.Errorf("%d runners ran the saga, %d were turned away; want 1 and %d", fresh, turnedAway.Load(), runners-1)
	}
}

// ClaimIsExclusive checks Store.Claim itself on an existing unfinished
// instance whose lease is free (released) or ended: the first Claim takes
// the lease — claim, lease end and update time, all three — and a second
// Claim at the same instant finds it taken and changes nothing. Then, in
// rounds, eight Claims on their own connections race for a released
// instance: exactly one claims, and the stored claim is the winner's.
func ClaimIsExclusive(t *testing.T, h *Harness) {
	ctx := t.Context()
	st := h.Store(t)
	clock := NewClock()
	for _, released := range []bool{true, false} {
		key := fmt.Sprintf("claim-released-%v", released)
		now := clock.Now()
		first, claimed, err := st.Claim(ctx, claimRecord(key, 1, now), now)
		if err != nil || !claimed {
			t.Fatalf("%s: insert: %v %v", key, claimed, err)
		}
		if released {
			first.Claim, first.LeaseUntil = 1, time.Time{}
			if err := st.Save(ctx, first); err != nil {
				t.Fatal(err)
			}
		} else {
			clock.Advance(TTL) // the lease ends
		}
		clock.Advance(time.Second)
		now = clock.Now()
		a := claimRecord(key, 2, now)
		got, claimed, err := st.Claim(ctx, a, now)
		if err != nil || !claimed || got.Claim != 2 {
			t.Fatalf("%s: first Claim of the free instance: claimed %v, %+v, %v", key, claimed, got, err)
		}
		b := claimRecord(key, 3, now)
		if got, claimed, err := st.Claim(ctx, b, now); err != nil || claimed || got.Claim != 2 {
			t.Errorf("%s: second Claim at the same instant: claimed %v (claim %d), %v; want not claimed, claim 2", key, claimed, got.Claim, err)
		}
		rec, err := h.Load(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Claim != 2 || !rec.LeaseUntil.Equal(a.LeaseUntil) || !rec.Updated.Equal(a.Updated) {
			t.Errorf("%s: stored claim %d lease %v updated %v; want claim 2 lease %v updated %v",
				key, rec.Claim, rec.LeaseUntil, rec.Updated, a.LeaseUntil, a.Updated)
		}
	}

	const rounds, claimers = 20, 8
	stores := make([]saga.Store, claimers)
	for i := range stores {
		stores[i] = h.Store(t)
	}
	for r := range rounds {
		key := fmt.Sprint("claim-race-", r)
		now := clock.Now()
		rec, claimed, err := st.Claim(ctx, claimRecord(key, 1, now), now)
		if err != nil || !claimed {
			t.Fatalf("%s: insert: %v %v", key, claimed, err)
		}
		rec.LeaseUntil = time.Time{}
		if err := st.Save(ctx, rec); err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		won := make([]bool, claimers)
		errs := make([]error, claimers)
		for i := range claimers {
			wg.Go(func() {
				<-start
				_, won[i], errs[i] = stores[i].Claim(ctx, claimRecord(key, int64(10+i), now), now)
			})
		}
		close(start)
		wg.Wait()
		var winners []int64
		for i := range claimers {
			if errs[i] != nil {
				t.Fatalf("%s: claimer %d: %v", key, i, errs[i])
			}
			if won[i] {
				winners = append(winners, int64(10+i))
			}
		}
		stored, err := h.Load(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(winners) != 1 || stored.Claim != winners[0] {
			t.Fatalf("%s: %d concurrent Claims of a released instance claimed it (claims %v), stored claim %d; want exactly one",
				key, len(winners), winners, stored.Claim)
		}
	}
}

// claimRecord is a fresh one-step instance key for Claim, claimed by claim
// at now with a lease of TTL.
func claimRecord(key string, claim int64, now time.Time) *saga.Record {
	in := []byte(`{"id":"` + key + `"}`)
	sum := sha256.Sum256(in)
	return &saga.Record{
		Key: key, Definition: "order", Version: 1, Input: in, InputHash: sum[:], Status: saga.Running,
		Steps: []saga.StepRecord{{Name: "s1", Status: saga.StepPending}},
		Claim: claim, LeaseUntil: now.Add(TTL), Created: now, Updated: now,
	}
}

// LeaseTakeoverFencesOldRunner: a runner paused in step 2 past its lease
// is taken over; the new runner completes the saga (step 2 again, same
// key); when the old runner wakes up its record is refused
// (ErrLeaseLost) and changes nothing.
func LeaseTakeoverFencesOldRunner(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	paused, wake := make(chan struct{}), make(chan struct{})
	f.on("do s2", func(ctx context.Context, _ *saga.Call[Order], n int, apply func() error) error {
		if n == 1 {
			close(paused)
			select {
			case <-wake:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return apply()
	})
	d := f.def(1, 1)
	oldErr := make(chan error, 1)
	go func() {
		_, err := d.Run(t.Context(), h.Store(t), "o9", Order{ID: "o9"})
		oldErr <- err
	}()
	select {
	case <-paused:
	case <-time.After(20 * time.Second):
		t.Fatal("the first runner did not reach step 2")
	}
	f.clock.Advance(TTL + time.Second)
	res, err := d.Run(t.Context(), h.Store(t), "o9", Order{ID: "o9"})
	if err != nil || res.Replayed {
		t.Fatalf("takeover Run: %+v %v", res, err)
	}
	before := f.status("o9", saga.Completed, done, done, done, done)
	close(wake)
	select {
	case err := <-oldErr:
		if !errors.Is(err, saga.ErrLeaseLost) {
			t.Fatalf("old runner: %v, want ErrLeaseLost", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("old runner did not return")
	}
	after := f.status("o9", saga.Completed, done, done, done, done)
	if after.Claim != before.Claim || !after.Updated.Equal(before.Updated) {
		t.Errorf("old runner changed the record: claim %d→%d, updated %v→%v", before.Claim, after.Claim, before.Updated, after.Updated)
	}
	if f.n("do s3") != 1 || f.n("do s2") != 2 {
		t.Errorf("calls %v", f.calls)
	}
	f.effects("o9:s1", "o9:s2", "o9:s3", "o9:s4")
}

// StepEndsWithLeaseWhileExtendBlocked: while a step runs, another
// transaction locks the instance's row, so the heartbeat's extensions wait
// behind the lock (and time out) and the lease cannot be renewed. The
// step's context must end, with ErrLeaseLost as its cause, no later than
// the lease stored under the lock, whatever the extension in flight does;
// the next runner then resumes the step and completes. Real clock, a 3 s
// lease.
func StepEndsWithLeaseWhileExtendBlocked(t *testing.T, h *Harness) {
	const ttl = 3 * time.Second
	type ending struct {
		at    time.Time
		cause error
	}
	inStep, ended := make(chan struct{}), make(chan ending, 1)
	var calls atomic.Int32
	d, err := saga.New("blocked", 1, &saga.Config{LeaseTTL: ttl, Retry: retry.Policy{MaxAttempts: 1}},
		saga.NewStep("wait", func(ctx context.Context, _ *saga.Call[Order]) (int, error) {
			if calls.Add(1) > 1 {
				return 1, nil
			}
			close(inStep)
			select {
			case <-ctx.Done():
				ended <- ending{time.Now(), context.Cause(ctx)}
			case <-time.After(30 * time.Second):
				ended <- ending{time.Now(), errors.New("the step's context did not end within 30 s")}
			}
			return 0, ctx.Err()
		}, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	runErr := make(chan error, 1)
	go func() { _, err := d.Run(ctx, h.Store(t), "blocked", Order{ID: "blocked"}); runErr <- err }()
	select {
	case <-inStep:
	case <-time.After(20 * time.Second):
		t.Fatal("the runner did not reach its step within 20 s")
	}
	lease, unlock := h.LockRow(t, "blocked")
	t.Cleanup(unlock)
	e := <-ended
	if !errors.Is(e.cause, saga.ErrLeaseLost) {
		t.Fatalf("the step's context ended with cause %v, want ErrLeaseLost", e.cause)
	}
	if e.at.After(lease) {
		t.Errorf("the step's context ended at %s, %v after its lease ended at %s (extensions blocked): another runner could claim while it ran",
			e.at.Format(time.RFC3339Nano), e.at.Sub(lease), lease.Format(time.RFC3339Nano))
	}
	select {
	case err := <-runErr:
		if !errors.Is(err, saga.ErrLeaseLost) {
			t.Fatalf("Run: %v, want ErrLeaseLost", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20 s of its step")
	}
	unlock()
	// The next runner resumes the step once the lease has passed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := d.Run(ctx, h.Store(t), "blocked", Order{ID: "blocked"})
		if err == nil {
			break
		}
		if !errors.Is(err, saga.ErrInProgress) || time.Now().After(deadline) {
			t.Fatalf("resuming Run: %v", err)
		}
		rec, err := h.Load(ctx, "blocked")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(rec.LeaseUntil) + time.Millisecond) // wall-clock lease expiry
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("step called %d times, want 2", n)
	}
}

// RetryableErrorRetriesStep: a retryable error retries the action within
// the run (same key); a permanent one does not (see
// FailureCompensatesInReverseOnce).
func RetryableErrorRetriesStep(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	f.on("do s2", func(_ context.Context, _ *saga.Call[Order], n int, apply func() error) error {
		if n < 3 {
			return saga.Retryable(errors.New("503"))
		}
		return apply()
	})
	d := f.def(1, 3)
	if _, err := d.Run(t.Context(), h.Store(t), "o10", Order{ID: "o10"}); err != nil {
		t.Fatal(err)
	}
	rec := f.status("o10", saga.Completed, done, done, done, done)
	if f.n("do s2") != 3 || rec.Steps[1].Attempts != 1 {
		t.Errorf("s2 called %d times, recorded %d attempts; want 3 calls in 1 attempt", f.n("do s2"), rec.Steps[1].Attempts)
	}
	// Retries used up fail the step like a permanent error.
	g := newFixture(t, h)
	g.on("do s2", func(context.Context, *saga.Call[Order], int, func() error) error {
		return saga.Retryable(errors.New("503"))
	})
	_, err := g.def(1, 3).Run(t.Context(), h.Store(t), "o11", Order{ID: "o11"})
	if !errors.Is(err, saga.ErrCompensated) || !errors.Is(err, retry.ErrExhausted) || g.n("do s2") != 3 {
		t.Fatalf("exhausted retries: %v (s2 called %d times)", err, g.n("do s2"))
	}
}

// DefinitionAndInputMismatch: an unfinished instance is resumed only by
// its own definition and input; a refused Run leaves the lease free.
func DefinitionAndInputMismatch(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	ctx, cancel := context.WithCancel(t.Context())
	f.on("do s2", func(c context.Context, _ *saga.Call[Order], n int, _ func() error) error {
		if n == 1 {
			cancel()
			return c.Err()
		}
		return nil
	})
	v1 := f.def(1, 1)
	if _, err := v1.Run(ctx, h.Store(t), "o12", Order{ID: "o12"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Run: %v", err)
	}
	st := h.Store(t)
	if _, err := f.def(2, 1).Run(t.Context(), st, "o12", Order{ID: "o12"}); !errors.Is(err, saga.ErrDefinitionMismatch) ||
		!strings.Contains(err.Error(), "order v1") {
		t.Errorf("version 2 resuming version 1: %v", err)
	}
	other, err := saga.New("other", 1, &saga.Config{Now: f.clock.Now}, f.step("s1"), f.step("s2"), f.step("s3"), f.step("s4"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Run(t.Context(), st, "o12", Order{ID: "o12"}); !errors.Is(err, saga.ErrDefinitionMismatch) {
		t.Errorf("another definition: %v", err)
	}
	fewer, err := saga.New("order", 1, &saga.Config{Now: f.clock.Now}, f.step("s1"), f.step("s2"), f.step("s3"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fewer.Run(t.Context(), st, "o12", Order{ID: "o12"}); !errors.Is(err, saga.ErrDefinitionMismatch) {
		t.Errorf("same name and version, other steps: %v", err)
	}
	if _, err := v1.Run(t.Context(), st, "o12", Order{ID: "o12", Amount: 1}); !errors.Is(err, saga.ErrInputMismatch) {
		t.Errorf("other input: %v", err)
	}
	if _, err := v1.Run(t.Context(), st, "o12", Order{ID: "o12"}); err != nil {
		t.Fatalf("own definition and input: %v", err)
	}
	f.status("o12", saga.Completed, done, done, done, done)
	if _, err := f.def(2, 1).Run(t.Context(), st, "o12", Order{ID: "o12"}); !errors.Is(err, saga.ErrDefinitionMismatch) {
		t.Errorf("version 2 replaying version 1: %v", err)
	}
}

// BadInputWritesNothing: bad keys and inputs are refused before any write.
func BadInputWritesNothing(t *testing.T, h *Harness) {
	f := newFixture(t, h)
	d := f.def(1, 1)
	st := h.Store(t)
	for _, key := range []string{"", strings.Repeat("k", saga.MaxKeyLen+1), "a\x00b", "line\nbreak", "\xff"} {
		if _, err := d.Run(t.Context(), st, key, Order{}); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("key %q: %v", key, err)
		}
	}
	if _, err := d.Run(t.Context(), nil, "k", Order{}); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("nil store: %v", err)
	}
	bad, err := saga.New("bad", 1, nil, saga.NewStep("s", func(context.Context, *saga.Call[chan int]) (int, error) { return 1, nil }, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Run(t.Context(), st, "k", make(chan int)); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("input json cannot encode: %v", err)
	}
	if _, err := h.Load(t.Context(), "k"); !errors.Is(err, saga.ErrNotFound) {
		t.Errorf("Load after refused Runs: %v", err)
	}
	if len(f.calls) != 0 {
		t.Errorf("calls %v", f.calls)
	}
	// A key of MaxKeyLen bytes (multibyte runes included) is fine.
	long := strings.Repeat("é", saga.MaxKeyLen/2) + "k"
	if _, err := d.Run(t.Context(), st, long, Order{ID: "x"}); err != nil {
		t.Errorf("key of %d bytes: %v", len(long), err)
	}
	if _, err := h.Load(t.Context(), long); err != nil {
		t.Errorf("Load of the long key: %v", err)
	}
}

// Reaper checks an adapter's DeleteFinished on store: finished instances
// (completed, compensated) updated before the cutoff go, in batches of
// limit; unfinished and newer ones stay.
func Reaper(t *testing.T, store saga.Store,
	deleteFinished func(ctx context.Context, before time.Time, limit int) (int64, error),
	load func(ctx context.Context, key string) (*saga.Record, error),
) {
	ctx := t.Context()
	clock := NewClock()
	t0 := clock.Now()
	cfg := &saga.Config{Now: clock.Now, Retry: retry.Policy{MaxAttempts: 1}}
	okStep := saga.NewStep("a", func(context.Context, *saga.Call[int]) (int, error) { return 1, nil },
		func(context.Context, *saga.Call[int], int) error { return nil })
	good, err := saga.New("good", 1, cfg, okStep)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := saga.New("bad", 1, cfg, okStep,
		saga.NewStep("b", func(context.Context, *saga.Call[int]) (int, error) { return 0, errBoom }, nil))
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	stopped, err := saga.New("stopped", 1, cfg, saga.NewStep("a", func(ctx context.Context, _ *saga.Call[int]) (int, error) {
		cancel()
		return 0, ctx.Err()
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []struct {
		key string
		err error
		d   *saga.Definition[int]
		ctx context.Context
	}{
		{"done-1", nil, good, ctx}, {"done-2", nil, good, ctx}, {"compensated", saga.ErrCompensated, bad, ctx},
		{"unfinished", context.Canceled, stopped, cancelled},
	} {
		if _, err := run.d.Run(run.ctx, store, run.key, 0); !errors.Is(err, run.err) || (run.err == nil && err != nil) {
			t.Fatalf("%s: %v", run.key, err)
		}
	}
	clock.Advance(time.Hour)
	if _, err := good.Run(ctx, store, "newer", 0); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for {
		n, err := deleteFinished(ctx, t0.Add(time.Minute), 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
		if n < 2 {
			break
		}
	}
	if !slices.Equal(got, []int64{2, 1}) {
		t.Errorf("deleted per batch %v, want [2 1]", got)
	}
	for key, gone := range map[string]bool{"done-1": true, "done-2": true, "compensated": true, "unfinished": false, "newer": false} {
		_, err := load(ctx, key)
		if gone != errors.Is(err, saga.ErrNotFound) || (!gone && err != nil) {
			t.Errorf("%s after DeleteFinished: %v", key, err)
		}
	}
}

// AwkwardValues: inputs, outputs and error messages with NUL, invalid
// UTF-8, non-BMP characters and large numbers are stored and replayed.
func AwkwardValues(t *testing.T, h *Harness) {
	type value struct {
		S string `json:"s"`
		N int64  `json:"n"`
	}
	odd := value{S: "nul\x00 tab\t emoji 🦫 bad\xff", N: 1<<62 + 1}
	ctx := t.Context()
	d, err := saga.New("odd", 1, &saga.Config{Retry: retry.Policy{MaxAttempts: 1}},
		saga.NewStep("echo", func(_ context.Context, c *saga.Call[value]) (value, error) { return c.Input, nil },
			func(context.Context, *saga.Call[value], value) error { return nil }),
		saga.NewStep("fail", func(context.Context, *saga.Call[value]) (int, error) {
			return 0, errors.New("bad\x00\xffmessage")
		}, nil))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := d.Run(ctx, h.Store(t), "odd", odd)
		if !errors.Is(err, saga.ErrCompensated) || !strings.Contains(err.Error(), "message") {
			t.Fatalf("Run %d: %v", i, err)
		}
	}
	rec, err := h.Load(ctx, "odd")
	if err != nil {
		t.Fatal(err)
	}
	var out value
	if err := json.Unmarshal(rec.Steps[0].Result, &out); err != nil || out.N != odd.N || out.S != strings.ToValidUTF8(odd.S, "\uFFFD") {
		t.Errorf("stored output %+v (%v), want %+v", out, err, odd)
	}
	good, err := saga.New("odd-ok", 1, nil,
		saga.NewStep("echo", func(_ context.Context, c *saga.Call[value]) (value, error) { return c.Input, nil }, nil))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		res, err := good.Run(ctx, h.Store(t), "odd-ok", odd)
		if err != nil || res.Replayed != (i == 1) {
			t.Fatalf("Run %d: %+v %v", i, res, err)
		}
		if err := res.Output("echo", &out); err != nil || out.N != odd.N || out.S != strings.ToValidUTF8(odd.S, "\uFFFD") {
			t.Errorf("Run %d: output %+v %v", i, out, err)
		}
	}
}

// Bench measures Run of a four-step saga with no-op actions on store: a
// new instance per iteration (claim + 5 records), and the replay of a
// completed one (claim attempt + read).
func Bench(b *testing.B, store saga.Store) {
	noop := func(name string) saga.Step[int] {
		return saga.NewStep(name, func(context.Context, *saga.Call[int]) (int, error) { return 1, nil }, nil)
	}
	d, err := saga.New("bench", 1, nil, noop("a"), noop("b"), noop("c"), noop("d"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("new", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if _, err := d.Run(b.Context(), store, fmt.Sprint("new-", i), i); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		if _, err := d.Run(b.Context(), store, "replay", 0); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if res, err := d.Run(b.Context(), store, "replay", 0); err != nil || !res.Replayed {
				b.Fatal(res, err)
			}
		}
	})
}
