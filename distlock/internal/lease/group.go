package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/concurkit/concurkit/distlock"
)

// Group is what a Locker leaves behind it: the leases it handed out and
// still holds, and the goroutines it left running — the cleanup of a
// Release whose caller stopped waiting, the undoing of an acquisition its
// caller abandoned while the request was in flight, watchers. A Locker's
// Close closes its Group: the leases are released and Close waits for
// every goroutine, so that a process that exits right after leaves no lock
// behind that a cleanup would have removed.
//
// The zero value is ready to use; a Group must not be copied after first
// use. Its methods are safe for concurrent use.
type Group struct {
	mu     sync.Mutex
	n      int           // goroutines running
	idle   chan struct{} // closed when n drops to 0; nil while n == 0
	closed bool
	// closing ends when Close is called (made on first use).
	closing context.Context
	stop    context.CancelCauseFunc
	leases  map[*Lease]struct{}
}

// Go runs f in a goroutine that Wait and Close wait for. It runs f also
// after Close: a cleanup must never be skipped because the Locker is
// closing (Close then waits for it too, while its ctx lasts).
func (g *Group) Go(f func()) {
	g.mu.Lock()
	if g.n == 0 {
		g.idle = make(chan struct{})
	}
	g.n++
	g.mu.Unlock()
	go func() {
		defer g.exit()
		f()
	}()
}

func (g *Group) exit() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 {
		close(g.idle)
		g.idle = nil
	}
}

// Wait waits until no goroutine started with Go is running, or ctx ends
// (then it returns ctx.Err()).
func (g *Group) Wait(ctx context.Context) error {
	g.mu.Lock()
	idle := g.idle
	g.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Closed reports whether Close was called.
func (g *Group) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Done returns a channel closed when Close is called: an Acquire that
// waits selects on it, so that Close ends the wait.
func (g *Group) Done() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closingLocked().Done()
}

func (g *Group) closingLocked() context.Context {
	if g.closing == nil {
		g.closing, g.stop = context.WithCancelCause(context.Background())
	}
	return g.closing
}

// Bind returns a context that ends when ctx ends or when Close is called,
// for an Acquire whose wait is not a Poll (a watch, a server-side wait).
// After the wait, Closing(ctx) tells whether Close ended it. Call cancel
// when the acquisition is over.
func (g *Group) Bind(ctx context.Context) (context.Context, context.CancelFunc) {
	g.mu.Lock()
	closing := g.closingLocked()
	g.mu.Unlock()
	c, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(closing, func() { cancel(distlock.ErrClosed) })
	return c, func() { stop(); cancel(nil) }
}

// Closing reports whether ctx, made by Bind, ended because of Close (and
// not because its parent ended).
func Closing(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), distlock.ErrClosed)
}

// ErrClosed returns the error of an acquisition refused or ended because
// the Locker of package pkg was closed: it matches distlock.ErrClosed and
// distlock.ErrNotAcquired.
func ErrClosed(pkg string) error {
	return fmt.Errorf("%w: %w: %s", distlock.ErrNotAcquired, distlock.ErrClosed, pkg)
}

// add registers a lease handed out by the Locker; it returns false once
// the Group is closed (the lease must not be handed out).
func (g *Group) add(l *Lease) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	if g.leases == nil {
		g.leases = make(map[*Lease]struct{})
	}
	g.leases[l] = struct{}{}
	return true
}

// remove forgets a lease whose Release cleanup finished.
func (g *Group) remove(l *Lease) {
	g.mu.Lock()
	delete(g.leases, l)
	g.mu.Unlock()
}

// closeConcurrency bounds the releases Close runs at once.
const closeConcurrency = 16

// Close marks the Group closed (Closed is true, Done is closed, and New
// refuses leases for it), releases every lease still registered (as
// Lease.Release does, 16 at a time, each bounded by its cleanup timeout)
// and waits until every goroutine of the Group returned or ctx ends. It
// returns nil when every release was confirmed and nothing is left
// running; the errors of releases that could not be confirmed (matching
// concurkit.ErrOutcomeUnknown); or, if ctx ended first, an error matching
// ctx.Err() and concurkit.ErrOutcomeUnknown (the cleanups go on in the
// background, each within its own bound). A lease found lost by its
// release is not an error of Close. A second Close waits again and
// reports only what is still unfinished.
func (g *Group) Close(ctx context.Context, pkg string) error {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		g.closingLocked()
		g.stop(distlock.ErrClosed)
	}
	leases := make([]*Lease, 0, len(g.leases))
	for l := range g.leases {
		leases = append(leases, l)
	}
	g.mu.Unlock()

	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	// A bounded number at a time: thousands of concurrent cleanups would
	// swamp the client's connections and time out against a busy server.
	sem := make(chan struct{}, closeConcurrency)
	for _, l := range leases {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// The cleanup runs in g (Release starts it with Go): waiting
			// for it below covers the case where ctx ends first.
			if err := l.Release(ctx); err != nil && !errors.Is(err, distlock.ErrLeaseLost) && ctx.Err() == nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := g.Wait(ctx); err != nil {
		return &unconfirmed{msg: fmt.Sprintf("%s: close: background cleanups still running", pkg), err: err}
	}
	return errors.Join(errs...)
}
