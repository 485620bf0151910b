package idemtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/idempotency"
)

// PhaseEnv is a TxStore on a SQL server with a rides table (id, charge)
// written in the phases' transactions.
type PhaseEnv[Tx any] struct {
	Store idempotency.TxStore[Tx]
	// InsertRide inserts ride id (charge empty) in tx.
	InsertRide func(ctx context.Context, tx Tx, id string) error
	// SetCharge records the ride's charge in tx.
	SetCharge func(ctx context.Context, tx Tx, id, charge string) error
	// Charge reads the ride's charge in tx.
	Charge func(ctx context.Context, tx Tx, id string) (string, error)
	// Rides counts the rides, outside any transaction.
	Rides func(ctx context.Context) (int, error)
	// KillTx terminates the server session tx runs on (from another
	// connection), as a crash of the process running the phase would.
	KillTx func(ctx context.Context, tx Tx) error
}

// Payments is a fake outside service with its own idempotency keys: a
// charge with a key it has seen returns the first charge.
type Payments struct {
	mu      sync.Mutex
	charges map[string]string
	Calls   int
}

// Charge charges once per key.
func (p *Payments) Charge(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Calls++
	if p.charges == nil {
		p.charges = map[string]string{}
	}
	if c, ok := p.charges[key]; ok {
		return c
	}
	c := "ch_" + randomID()
	p.charges[key] = c
	return c
}

// Distinct returns how many charges were made.
func (p *Payments) Distinct() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.charges)
}

// Receipt is the operation's result.
type Receipt struct {
	Ride   string
	Charge string
}

// rideOp is the three-phase operation of Brandur Leach's rocket-rides:
// create the ride, charge the card through the payment service (with the
// phase's derived key) and record the charge, then finish with a receipt.
// runs counts each phase's executions; fail makes the charge phase fail
// after the payment service answered (a timeout on the way back), block
// makes it wait, after killing its session, until the channel closes.
type rideOp[Tx any] struct {
	env      PhaseEnv[Tx]
	payments *Payments
	mu       sync.Mutex
	runs     map[string]int
	attempts []int64
	fail     bool
	block    chan struct{} // non-nil: crash in the charge phase
	blocked  chan struct{} // closed once the charge phase crashed
}

var errTimeout = errors.New("idemtest: payment service timed out")

func (o *rideOp[Tx]) count(phase string, attempt int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.runs == nil {
		o.runs = map[string]int{}
	}
	o.runs[phase]++
	o.attempts = append(o.attempts, attempt)
}

func (o *rideOp[Tx]) phases() []idempotency.Phase[Tx] {
	return []idempotency.Phase[Tx]{
		{Name: "ride_created", Run: func(ctx context.Context, tx Tx, st idempotency.Step) error {
			o.count(st.Phase, st.Attempt)
			return o.env.InsertRide(ctx, tx, st.Key)
		}},
		{Name: "charged", Run: func(ctx context.Context, tx Tx, st idempotency.Step) error {
			o.count(st.Phase, st.Attempt)
			charge := o.payments.Charge(st.DerivedKey())
			if err := o.env.SetCharge(ctx, tx, st.Key, charge); err != nil {
				return err
			}
			o.mu.Lock()
			fail, block := o.fail, o.block
			o.fail, o.block = false, nil
			o.mu.Unlock()
			if block != nil {
				if err := o.env.KillTx(context.WithoutCancel(ctx), tx); err != nil {
					return fmt.Errorf("kill: %w", err)
				}
				close(o.blocked)
				<-block // the process is gone; the key stays locked
				return errors.New("idemtest: crashed")
			}
			if fail {
				return errTimeout
			}
			return nil
		}},
	}
}

func (o *rideOp[Tx]) finish(ctx context.Context, tx Tx, st idempotency.Step) (Receipt, error) {
	o.count(st.Phase, st.Attempt)
	charge, err := o.env.Charge(ctx, tx, st.Key)
	return Receipt{Ride: st.Key, Charge: charge}, err
}

func (o *rideOp[Tx]) do(ctx context.Context, opts *idempotency.Options) (Receipt, bool, error) {
	return idempotency.DoPhases(ctx, o.env.Store, "rider-1", "ride-1", []byte("from A to B"), opts, o.phases(), o.finish)
}

func (o *rideOp[Tx]) check(t *testing.T, want map[string]int) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for phase, n := range want {
		if o.runs[phase] != n {
			t.Fatalf("phase runs %v, want %v", o.runs, want)
		}
	}
}

// Phases runs the recovery-point tests.
func Phases[Tx any](t *testing.T, newEnv func(t *testing.T) PhaseEnv[Tx]) {
	t.Run("FailureInPhase2ResumesAtPhase2", func(t *testing.T) { failureInPhase2(t, newEnv(t)) })
	t.Run("CrashInPhase2TakenOverAtPhase2", func(t *testing.T) { crashInPhase2(t, newEnv(t)) })
	t.Run("BadPhases", func(t *testing.T) { badPhases(t, newEnv(t)) })
}

// failureInPhase2: a three-phase operation failing in phase 2 (after the
// outside call) resumes at phase 2 on retry and never repeats phase 1;
// the outside call, repeated with the derived key, charges once.
func failureInPhase2[Tx any](t *testing.T, env PhaseEnv[Tx]) {
	ctx := t.Context()
	op := &rideOp[Tx]{env: env, payments: &Payments{}, fail: true}
	if _, _, err := op.do(ctx, nil); !errors.Is(err, errTimeout) {
		t.Fatalf("first run: %v, want the phase's error", err)
	}
	op.check(t, map[string]int{"ride_created": 1, "charged": 1, idempotency.Finished: 0})
	got, replayed, err := op.do(ctx, nil)
	if err != nil || replayed {
		t.Fatalf("retry: %v %v", replayed, err)
	}
	op.check(t, map[string]int{"ride_created": 1, "charged": 2, idempotency.Finished: 1})
	if op.payments.Calls != 2 || op.payments.Distinct() != 1 || got.Charge == "" || got.Ride != "ride-1" {
		t.Fatalf("payment calls %d, charges %d, receipt %+v", op.payments.Calls, op.payments.Distinct(), got)
	}
	if want := []int64{1, 1, 2, 2}; fmt.Sprint(op.attempts) != fmt.Sprint(want) {
		t.Fatalf("Step.Attempt of the phase runs %v, want %v", op.attempts, want)
	}
	again, replayed, err := op.do(ctx, nil)
	if err != nil || !replayed || again != got {
		t.Fatalf("replay %+v %v %v, want %+v", again, replayed, err, got)
	}
	op.check(t, map[string]int{"ride_created": 1, "charged": 2, idempotency.Finished: 1})
	if n, err := env.Rides(ctx); err != nil || n != 1 {
		t.Fatalf("%d rides, %v", n, err)
	}
}

// crashInPhase2: the process running phase 2 dies (its session is killed
// mid-transaction and it never returns): the key stays locked at phase 1's
// recovery point; a retry gets ErrInProgress until the lock times out,
// then takes the key over and resumes at phase 2.
func crashInPhase2[Tx any](t *testing.T, env PhaseEnv[Tx]) {
	ctx := t.Context()
	clock := NewClock()
	opts := &idempotency.Options{TTL: time.Hour, LockTimeout: time.Minute, Now: clock.Now}
	op := &rideOp[Tx]{env: env, payments: &Payments{}, block: make(chan struct{}), blocked: make(chan struct{})}
	block := op.block
	zombie := make(chan error, 1)
	go func() {
		_, _, err := op.do(ctx, opts)
		zombie <- err
	}()
	select {
	case <-op.blocked:
	case err := <-zombie:
		t.Fatalf("the crashing run returned: %v", err)
	}
	if _, _, err := op.do(ctx, opts); !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("before the lock timeout: %v, want ErrInProgress", err)
	}
	clock.Add(time.Minute)
	got, replayed, err := op.do(ctx, opts)
	if err != nil || replayed {
		t.Fatalf("take-over: %v %v", replayed, err)
	}
	op.check(t, map[string]int{"ride_created": 1, "charged": 2, idempotency.Finished: 1})
	if op.payments.Distinct() != 1 || got.Charge == "" {
		t.Fatalf("charges %d, receipt %+v", op.payments.Distinct(), got)
	}
	close(block)
	if err := <-zombie; err == nil {
		t.Fatal("the crashed run succeeded")
	}
	if again, replayed, err := op.do(ctx, opts); err != nil || !replayed || again != got {
		t.Fatalf("replay %+v %v %v, want %+v", again, replayed, err, got)
	}
	if n, err := env.Rides(ctx); err != nil || n != 1 {
		t.Fatalf("%d rides, %v", n, err)
	}
}

func badPhases[Tx any](t *testing.T, env PhaseEnv[Tx]) {
	ctx := t.Context()
	run := func(context.Context, Tx, idempotency.Step) error { return nil }
	finish := func(context.Context, Tx, idempotency.Step) (int, error) { return 1, nil }
	for name, phases := range map[string][]idempotency.Phase[Tx]{
		"empty name": {{Name: "", Run: run}},
		"reserved":   {{Name: idempotency.Started, Run: run}},
		"duplicate":  {{Name: "a", Run: run}, {Name: "a", Run: run}},
		"nil run":    {{Name: "a"}},
	} {
		if _, _, err := idempotency.DoPhases(ctx, env.Store, "", "k", nil, nil, phases, finish); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// A key stored at a recovery point that the operation no longer has.
	failing := []idempotency.Phase[Tx]{{Name: "old", Run: run}, {Name: "gone", Run: func(context.Context, Tx, idempotency.Step) error { return errTimeout }}}
	if _, _, err := idempotency.DoPhases(ctx, env.Store, "", "k", nil, nil, failing, finish); !errors.Is(err, errTimeout) {
		t.Fatal(err)
	}
	renamed := []idempotency.Phase[Tx]{{Name: "new", Run: run}}
	if _, _, err := idempotency.DoPhases(ctx, env.Store, "", "k", nil, nil, renamed, finish); err == nil {
		t.Fatal("resumed at an unknown recovery point")
	}
	// No phases at all: finish alone, in one transaction.
	if v, _, err := idempotency.DoPhases(ctx, env.Store, "", "k2", nil, nil, nil, finish); err != nil || v != 1 {
		t.Fatal(v, err)
	}
}

// PhasesLargeResult: a finish whose value is over what the store keeps
// (storeLimit bytes) completes the key with a marker in a second
// transaction that commits finish's writes (the first rolled back with
// the value): the caller gets the value, retries get ErrResponseTooLarge
// and run nothing, not even after the lock timeout.
func PhasesLargeResult[Tx any](t *testing.T, env PhaseEnv[Tx], storeLimit int) {
	ctx := t.Context()
	clock := NewClock()
	opts := &idempotency.Options{TTL: time.Hour, LockTimeout: time.Minute, Now: clock.Now}
	var phases, finishes int
	ops := []idempotency.Phase[Tx]{{Name: "ride_created", Run: func(ctx context.Context, tx Tx, st idempotency.Step) error {
		phases++
		return env.InsertRide(ctx, tx, st.Key)
	}}}
	finish := func(ctx context.Context, tx Tx, st idempotency.Step) (string, error) {
		finishes++
		return strings.Repeat("r", storeLimit), env.SetCharge(ctx, tx, st.Key, fmt.Sprint("ch_", finishes))
	}
	v, replayed, err := idempotency.DoPhases(ctx, env.Store, "", "ride-1", nil, opts, ops, finish)
	if err != nil || replayed || len(v) != storeLimit {
		t.Fatalf("first: %d bytes, replayed=%v, %v", len(v), replayed, err)
	}
	for range 2 {
		if _, replayed, err := idempotency.DoPhases(ctx, env.Store, "", "ride-1", nil, opts, ops, finish); !errors.Is(err, idempotency.ErrResponseTooLarge) || !replayed {
			t.Fatalf("retry: replayed=%v %v, want ErrResponseTooLarge", replayed, err)
		}
		clock.Add(2 * time.Minute)
	}
	if rides, err := env.Rides(ctx); err != nil || rides != 1 || phases != 1 || finishes != 2 {
		t.Fatalf("%d rides (%v), phase ran %d times, finish %d times; want 1, 1, 2 (once rolled back)", rides, err, phases, finishes)
	}
}
