package saga

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/retry"
)

// releaseTimeout bounds the release of a lease after a Run failed (its
// context may have ended): a lease that cannot be released ends by itself
// after LeaseTTL.
const releaseTimeout = 5 * time.Second

// maxErrorLen bounds a stored error message (bytes).
const maxErrorLen = 2000

// Run runs the saga instance key with input, from where it stands, and
// returns its outcome.
//
// A new key starts a new instance, recorded in store before the first
// action runs. A key whose instance is unfinished resumes it: done steps
// are skipped, a step found Running (started, not recorded) runs again
// with the same step key, and an interrupted compensation continues with
// the steps not yet compensated. A key whose instance is finished returns
// the stored outcome and calls nothing: the stored outputs of a completed
// saga (Result.Replayed), the *FailedError of a compensated one. Every
// retry of a key must present the same input (compared by its JSON
// encoding's SHA-256) and the same definition name, version and steps.
//
// Steps run in order; each step's output is recorded (in the same write
// that marks the next step Running) before the next action starts. An
// action that fails with a retryable error is retried under Config.Retry;
// a permanent error, or retries used up, fails the step: the saga turns
// Compensating, and the compensations of the done steps run in reverse
// order, each recorded as it succeeds. Compensations are retried on every
// error under Config.Retry; if one keeps failing, Run returns a
// *FailedError matching ErrCompensationFailed, the instance stays
// Compensating, and a later Run resumes from that step.
//
// Exactly-once: while it runs, the runner holds a lease on the instance
// (taken atomically by Store.Claim, renewed with every record and in the
// background during steps; a step's context ends before the lease does,
// even while a renewal hangs: see Config.LeaseTTL), so two Runs of one key
// never run a step at the same time; the other gets ErrInProgress. A
// runner that crashes leaves its lease to expire (Config.LeaseTTL); every
// write is fenced by the runner's claim, so one whose lease was taken
// over records nothing more (ErrLeaseLost). Because a step can be started and not recorded (a
// crash between the two), actions and compensations run at least once and
// must be idempotent by their step key: together that is effectively once.
//
// Run returns (result, nil) when every action succeeded. Errors:
// concurkit.ErrInvalidArgument (nil store, bad key, an input or output
// json cannot encode) before any write where possible; *FailedError
// matching ErrCompensated or ErrCompensationFailed; ErrInProgress;
// ErrLeaseLost; ErrDefinitionMismatch; ErrInputMismatch; the store's
// errors, wrapped. When ctx ends, Run stops (an action running gets the
// cancelled context; its step stays Running and is run again by the next
// Run, never compensated for that), releases its lease and returns an
// error matching ctx.Err().
func (d *Definition[In]) Run(ctx context.Context, store Store, key string, input In) (*Result, error) {
	if handle.IsNil(store) {
		return nil, invalid("nil store")
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	in, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("%w: saga: %s: encoding the input: %w", concurkit.ErrInvalidArgument, key, err)
	}
	sum := sha256.Sum256(in)
	now := d.now()
	fresh := &Record{
		Key: key, Definition: d.name, Version: d.version, Input: in, InputHash: sum[:],
		Status: Running, Steps: make([]StepRecord, len(d.steps)),
		Claim: newClaim(), LeaseUntil: now.Add(d.ttl), Created: now, Updated: now,
	}
	for i, s := range d.steps {
		fresh.Steps[i] = StepRecord{Name: s.name, Status: StepPending}
	}
	rec, claimed, err := store.Claim(ctx, fresh, now)
	if err != nil {
		return nil, storeError(ctx, key, "claim", err)
	}
	r := &runner[In]{d: d, store: store, rec: rec, input: input}
	if claimed {
		rec.Claim, rec.LeaseUntil = fresh.Claim, fresh.LeaseUntil
		// Release on every way out that did not release by a final record:
		// an error, the end of ctx, a panic in a step.
		defer func() {
			if !r.released {
				r.release(ctx)
			}
		}()
	}
	if err := d.match(rec, sum[:]); err != nil {
		return nil, err
	}
	if !claimed {
		return d.outcome(rec)
	}
	return r.run(ctx)
}

// newClaim draws a claim: random, so that no two runners share one, and
// positive.
func newClaim() int64 { return rand.Int64N(math.MaxInt64) + 1 }

// match checks that rec was started by d with the same input.
func (d *Definition[In]) match(rec *Record, inputHash []byte) error {
	names := make([]string, len(rec.Steps))
	for i, s := range rec.Steps {
		names[i] = s.Name
	}
	mine := make([]string, len(d.steps))
	for i, s := range d.steps {
		mine[i] = s.name
	}
	if rec.Definition != d.name || rec.Version != d.version || !slices.Equal(names, mine) {
		return fmt.Errorf("%w: %s was started by %s v%d (steps %s), not by %s v%d (steps %s)", ErrDefinitionMismatch,
			rec.Key, rec.Definition, rec.Version, strings.Join(names, ","), d.name, d.version, strings.Join(mine, ","))
	}
	if !bytes.Equal(rec.InputHash, inputHash) {
		return fmt.Errorf("%w: %s", ErrInputMismatch, rec.Key)
	}
	return nil
}

// outcome is what Run returns for an instance it did not claim.
func (d *Definition[In]) outcome(rec *Record) (*Result, error) {
	switch rec.Status {
	case Completed:
		return &Result{Key: rec.Key, Replayed: true, steps: rec.Steps}, nil
	case Compensated:
		f := failedStep(rec.Steps)
		fe := &FailedError{Key: rec.Key, Err: errors.New(rec.Error)}
		if f < len(rec.Steps) {
			fe.Step, fe.Err = rec.Steps[f].Name, errors.New(rec.Steps[f].Error)
		}
		return nil, fe
	}
	return nil, fmt.Errorf("%w: %s (%s, lease until %s)", ErrInProgress, rec.Key, rec.Status, rec.LeaseUntil.Format(time.RFC3339Nano))
}

// failedStep returns the index of the Failed step, or len(steps).
func failedStep(steps []StepRecord) int {
	if f := slices.IndexFunc(steps, func(s StepRecord) bool { return s.Status == StepFailed }); f >= 0 {
		return f
	}
	return len(steps)
}

// storeError wraps a Store error, joined with ctx.Err() when ctx ended the
// call and the store did not say so.
func storeError(ctx context.Context, key, op string, err error) error {
	err = fmt.Errorf("saga: %s: %s: %w", key, op, err)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, cerr)
	}
	return err
}

// runner runs one claimed instance. Its record is touched only by the
// goroutine of Run (the heartbeat reads the key and claim, which never
// change).
type runner[In any] struct {
	d        *Definition[In]
	store    Store
	rec      *Record
	input    In
	cause    error // the action error that failed the saga in this run
	released bool  // the lease was released by a record
}

func (r *runner[In]) run(ctx context.Context) (*Result, error) {
	if r.rec.Status == Running {
		if err := r.forward(ctx); err != nil {
			return nil, err
		}
		if r.rec.Status == Completed {
			return &Result{Key: r.rec.Key, steps: r.rec.Steps}, nil
		}
	}
	if r.rec.Status != Compensating { // a Store that broke its contract
		return nil, fmt.Errorf("saga: %s: the store claimed an instance in status %q", r.rec.Key, r.rec.Status)
	}
	return nil, r.compensate(ctx)
}

// save records the instance, renewing the lease or, with release,
// releasing it.
func (r *runner[In]) save(ctx context.Context, release bool) error {
	now := r.d.now()
	r.rec.Updated = now
	r.rec.LeaseUntil = now.Add(r.d.ttl)
	if release {
		r.rec.LeaseUntil = time.Time{}
	}
	if err := r.store.Save(ctx, r.rec); err != nil {
		return storeError(ctx, r.rec.Key, "record", err)
	}
	r.released = release
	return nil
}

// release records the instance as it stands, lease released, after a Run
// that did not finish. Everything in the record is true (a step marked
// Running may not have started: it runs again anyway), so this also saves
// progress that a failed record did not. It is best effort: a lease that
// cannot be released ends by itself.
func (r *runner[In]) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = r.save(ctx, true)
}

// forward runs the actions from the first step not done.
func (r *runner[In]) forward(ctx context.Context) error {
	steps := r.rec.Steps
	i := 0
	for i < len(steps) && steps[i].Status == StepDone {
		i++
	}
	if i == len(steps) { // every step done, completion not recorded
		r.rec.Status = Completed
		return r.save(ctx, true)
	}
	r.start(i)
	if err := r.save(ctx, false); err != nil {
		return err
	}
	for {
		out, err := r.act(ctx, i)
		if err != nil {
			return r.fail(ctx, i, err)
		}
		steps[i].Status, steps[i].Result, steps[i].Error = StepDone, out, ""
		if i++; i == len(steps) {
			r.rec.Status, r.rec.Error = Completed, ""
			return r.save(ctx, true)
		}
		// One record says "step i-1 done, step i started": a step never
		// starts before its predecessor's output is durable.
		r.start(i)
		if err := r.save(ctx, false); err != nil {
			return err
		}
	}
}

func (r *runner[In]) start(i int) {
	s := &r.rec.Steps[i]
	s.Status = StepRunning
	s.Attempts++
}

// fail handles the error of step i's action: the end of ctx, a lost lease
// or an output that cannot be encoded stop the run with the step Running;
// any other error fails the step and turns the saga Compensating.
func (r *runner[In]) fail(ctx context.Context, i int, err error) error {
	name := r.rec.Steps[i].Name
	if stop := r.interrupted(ctx, name, err); stop != nil {
		return stop
	}
	s := &r.rec.Steps[i]
	s.Status, s.Error = StepFailed, storedError(err)
	r.rec.Status, r.rec.Error = Compensating, s.Error
	r.cause = err
	return r.save(ctx, false)
}

// interrupted returns the error that stops the run without failing the
// step, or nil if err is the step's own failure.
func (r *runner[In]) interrupted(ctx context.Context, step string, err error) error {
	var enc *encodeError
	switch {
	case errors.As(err, &enc):
		// The action succeeded but its output cannot be stored: a bug in
		// the definition. Neither done (nothing to return on replay) nor
		// failed (its effect would never be compensated).
		return fmt.Errorf("%w: saga: %s: step %q: %w", concurkit.ErrInvalidArgument, r.rec.Key, step, err)
	case errors.Is(err, ErrLeaseLost):
		r.released = true // nothing more can be recorded
		return fmt.Errorf("saga: %s: step %q: %w", r.rec.Key, step, err)
	case ctx.Err() != nil:
		err = fmt.Errorf("saga: %s: step %q interrupted: %w", r.rec.Key, step, err)
		if !errors.Is(err, ctx.Err()) {
			err = errors.Join(err, ctx.Err())
		}
		return err
	}
	return nil
}

// call returns the Call of step i.
func (r *runner[In]) call(i int) *Call[In] {
	s := r.rec.Steps[i]
	return &Call[In]{
		Key: r.rec.Key + ":" + s.Name, SagaKey: r.rec.Key, Step: s.Name, Attempt: s.Attempts,
		Input: r.input, steps: slices.Clone(r.rec.Steps),
	}
}

// act runs step i's action under the retry policy and the lease heartbeat.
func (r *runner[In]) act(ctx context.Context, i int) (json.RawMessage, error) {
	action, c := r.d.steps[i].action, r.call(i)
	var out json.RawMessage
	err := r.guard(ctx, func(ctx context.Context) error {
		return retry.Do(ctx, r.d.policy, func(ctx context.Context) error {
			o, err := action(ctx, c)
			out = o
			return err
		})
	})
	return out, err
}

// compensate runs the compensations of the done steps before the failed
// one, last first, and returns the saga's *FailedError.
func (r *runner[In]) compensate(ctx context.Context) error {
	steps := r.rec.Steps
	f := failedStep(steps)
	fe := &FailedError{Key: r.rec.Key, Err: r.cause}
	if f < len(steps) {
		fe.Step = steps[f].Name
		if fe.Err == nil {
			fe.Err = errors.New(steps[f].Error)
		}
	}
	if fe.Err == nil {
		fe.Err = errors.New(r.rec.Error)
	}
	for j := f - 1; j >= 0; j-- {
		if steps[j].Status != StepDone {
			continue // compensated by an earlier run
		}
		if err := r.undo(ctx, j); err != nil {
			fe.CompensationStep, fe.CompensationErr = steps[j].Name, err
			if stop := r.interrupted(ctx, steps[j].Name, err); stop != nil {
				fe.CompensationErr = stop
				return fe
			}
			steps[j].Error = storedError(err)
			r.rec.Error = steps[j].Error
			if serr := r.save(ctx, true); serr != nil {
				return errors.Join(fe, serr)
			}
			return fe
		}
		steps[j].Status, steps[j].Error = StepCompensated, ""
		// The last compensation and the end of the saga are one record.
		last := !slices.ContainsFunc(steps[:j], func(s StepRecord) bool { return s.Status == StepDone })
		if last {
			r.rec.Status = Compensated
		}
		if err := r.save(ctx, last); err != nil {
			fe.CompensationStep, fe.CompensationErr = steps[j].Name, err
			return fe
		}
		if last {
			return fe
		}
	}
	r.rec.Status = Compensated // nothing was left to compensate
	if err := r.save(ctx, true); err != nil {
		fe.CompensationErr = err
	}
	return fe
}

// undo runs step j's compensation, if it has one, retrying every error but
// the end of the step's context.
func (r *runner[In]) undo(ctx context.Context, j int) error {
	comp := r.d.steps[j].compensate
	if comp == nil {
		return nil
	}
	c, result := r.call(j), r.rec.Steps[j].Result
	return r.guard(ctx, func(ctx context.Context) error {
		p := r.d.policy
		p.Retryable = func(error) bool { return ctx.Err() == nil }
		return retry.Do(ctx, p, func(ctx context.Context) error { return comp(ctx, c, result) })
	})
}

// guard runs fn while a heartbeat extends the lease every LeaseTTL/3.
// fn's context ends, with ErrLeaseLost as its cause, when the lease is
// lost (an extension finds it taken over) or ends as known locally (see
// heartbeat), and guard then returns an error matching ErrLeaseLost.
func (r *runner[In]) guard(ctx context.Context, fn func(ctx context.Context) error) error {
	actx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	key, claim, until := r.rec.Key, r.rec.Claim, r.rec.LeaseUntil
	wg.Go(func() { r.heartbeat(ctx, stop, lost, key, claim, until) })
	// Deferred too, for a step that panics.
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer halt()
	err := fn(actx)
	halt()
	if cause := context.Cause(actx); errors.Is(cause, ErrLeaseLost) {
		return fmt.Errorf("%w (step stopped: %w)", cause, err)
	}
	return err
}

// heartbeat extends the lease of the claim every d.heartbeat until stop is
// closed or ctx ends; until is when the lease ends now.
//
// The step must stop before another runner can claim, whatever an
// extension in flight does (a statement queued behind a row lock, a
// frozen server): the lease is only known to last until the start of the
// last successful claim, record or extension plus LeaseTTL (each computes
// its lease end from the clock read before its request), so a timer ends
// the step at that instant minus d.margin, independently of the
// extensions, and each successful extension moves the timer. Checking
// only after an extension returned, against a time read before it, let a
// step run on for up to one more interval after its lease ended.
//
// An extension in flight when the step ends is not cancelled but bounded
// by the interval: cancelling a statement can cost its connection (pgx
// and go-sql-driver close a socket whose context ends mid-query), which
// would fail the next record on a single-connection store.
func (r *runner[In]) heartbeat(ctx context.Context, stop <-chan struct{}, lost context.CancelCauseFunc, key string, claim int64, until time.Time) {
	hooks := observe.FromContext(ctx)
	var once sync.Once
	lose := func(err error) {
		once.Do(func() {
			err = fmt.Errorf("saga: %s: extending the lease: %w", key, err)
			hooks.OnLeaseLost(ctx, observe.LeaseEvent{Package: "saga", Key: key, Token: claim, Err: err})
			lost(err)
		})
	}
	ended := func(until time.Time) error {
		return fmt.Errorf("%w: lease ends at %s (stopping %v before), not extended in time",
			ErrLeaseLost, until.Format(time.RFC3339Nano), r.d.margin)
	}
	end := until.Add(-r.d.margin)
	expire := time.AfterFunc(end.Sub(r.d.now()), func() { lose(ended(until)) })
	defer expire.Stop()
	t := time.NewTicker(r.d.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := r.d.now()
		if !now.Before(end) { // a clock that jumps (Config.Now) passes the timer
			lose(ended(until))
			return
		}
		next := now.Add(r.d.ttl)
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.d.heartbeat)
		err := r.store.Extend(ectx, key, claim, next)
		cancel()
		hooks.OnLeaseExtend(ctx, observe.LeaseEvent{Package: "saga", Key: key, Token: claim, Err: err})
		if errors.Is(err, ErrLeaseLost) {
			lose(err)
			return
		}
		if err != nil {
			continue // the timer ends the step if no extension succeeds in time
		}
		if !expire.Stop() {
			return // the lease ended while the extension was in flight
		}
		until, end = next, next.Add(-r.d.margin)
		expire.Reset(end.Sub(r.d.now()))
	}
}

// storedError is err's message as stored: valid UTF-8 without NUL (which
// PostgreSQL text refuses), cut to maxErrorLen bytes on a rune boundary.
func storedError(err error) string {
	s := strings.ReplaceAll(strings.ToValidUTF8(err.Error(), "\uFFFD"), "\x00", `\x00`)
	if len(s) <= maxErrorLen {
		return s
	}
	cut := maxErrorLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
