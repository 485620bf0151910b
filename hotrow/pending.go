package hotrow

import (
	"context"
	"errors"
	"sync"

	"github.com/concurkit/concurkit"
)

// request states, guarded by the owner's mutex.
const (
	waiting  = iota // queued, not sent
	sent            // in a batch at the database
	answered        // out or err set, done closed
	dropped         // its caller left before it was sent
)

// pending is one caller's request in a batching queue (a Combiner's or a
// Ledger's).
type pending[In, Out any] struct {
	in    In
	state int
	done  chan struct{}
	out   Out
	err   error
}

func newPending[In, Out any](in In) *pending[In, Out] {
	return &pending[In, Out]{in: in, done: make(chan struct{})}
}

// await returns r's answer, or what its caller is told when ctx ends
// first: a request still waiting is dropped (never sent) and reported as
// ErrNotApplied joined with ctx.Err(); one at the database is reported as
// outcome unknown. mu guards r.state.
func (r *pending[In, Out]) await(ctx context.Context, mu *sync.Mutex) (Out, error) {
	select {
	case <-r.done:
		return r.out, r.err
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	var zero Out
	switch r.state {
	case waiting:
		r.state = dropped
		return zero, joinNotApplied(ctx.Err())
	case sent:
		return zero, &concurkit.AmbiguousCommitError{Err: ctx.Err()}
	}
	return r.out, r.err // answered as ctx ended
}

// answer wakes the callers of batch; mu guards their state.
func answer[In, Out any](mu *sync.Mutex, batch []*pending[In, Out]) {
	mu.Lock()
	defer mu.Unlock()
	for _, r := range batch {
		r.state = answered
		close(r.done)
	}
}

// fail gives every request of batch err.
func fail[In, Out any](batch []*pending[In, Out], err error) {
	var zero Out
	for _, r := range batch {
		r.out, r.err = zero, err
	}
}

// joinNotApplied is what a caller whose ctx ended before its request was
// queued is told.
func joinNotApplied(ctxErr error) error { return errors.Join(ErrNotApplied, ctxErr) }

// closeWait waits for wg (the batches in flight) or ctx; when ctx ends
// first it cancels the batches and still waits for them to return.
func closeWait(ctx context.Context, wg *sync.WaitGroup, cancel context.CancelFunc) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		cancel()
		return nil
	case <-ctx.Done():
		cancel()
		<-done
		return ctx.Err()
	}
}
