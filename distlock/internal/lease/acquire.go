package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/retry"
)

// Resolve validates key and opts and returns a copy of the options with
// defaults applied (nil opts or zero TTL → distlock.DefaultTTL). It never
// modifies *opts. It returns distlock.ErrInvalidKey for an empty key and
// an error matching concurkit.ErrInvalidArgument for a negative TTL; pkg
// prefixes the messages.
func Resolve(pkg, key string, opts *distlock.Options) (distlock.Options, error) {
	var o distlock.Options
	if opts != nil {
		o = *opts
	}
	if key == "" {
		return o, fmt.Errorf("%w: %s: empty key", distlock.ErrInvalidKey, pkg)
	}
	if o.TTL < 0 {
		return o, fmt.Errorf("%w: %s: TTL %v < 0", concurkit.ErrInvalidArgument, pkg, o.TTL)
	}
	if o.TTL == 0 {
		o.TTL = distlock.DefaultTTL
	}
	return o, nil
}

// Default delays of Poll.
const (
	DefaultPollMin = time.Millisecond
	DefaultPollMax = 50 * time.Millisecond
)

// PollPolicy is the backoff between attempts of Poll: a random delay in
// [0, min(Max, Min·2^(n-1))] after the n-th failed attempt (full jitter).
// Zero fields mean DefaultPollMin and DefaultPollMax. Package and Key name
// the acquisition in the LockWait event.
type PollPolicy struct {
	Min, Max     time.Duration
	Package, Key string
	// Stop, if not nil, ends the wait when it is closed (a Group's Done:
	// the Locker is being closed); Poll then returns an error matching
	// distlock.ErrClosed and distlock.ErrNotAcquired.
	Stop <-chan struct{}
}

// Poll calls try until it returns a lease, an error that does not match
// distlock.ErrNotAcquired, p.Stop is closed (ErrClosed), or ctx ends; in
// the last case it returns
// errors.Join(distlock.ErrNotAcquired, ctx.Err()) (and a lease try may
// have returned together with an error is never leaked: try must not
// return both). Backends that can wait on a server-side event (ZooKeeper
// watches, etcd revisions) do not need it.
//
// When the first attempt found the lock held (ErrNotAcquired), the outcome
// is reported to the hooks of ctx (ReportWait); an Acquire that succeeds at
// once, or fails for another reason first, is not a wait.
func Poll[L any](ctx context.Context, p PollPolicy, try func(ctx context.Context) (L, error)) (l L, err error) {
	if p.Min <= 0 {
		p.Min = DefaultPollMin
	}
	if p.Max <= 0 {
		p.Max = DefaultPollMax
	}
	p.Max = max(p.Max, p.Min)
	var zero L
	var t *time.Timer
	var start time.Time   // of the first attempt
	n, waited := 0, false // waited: an attempt found the lock held
	defer func() {
		if t != nil {
			t.Stop()
		}
		if waited {
			ReportWait(ctx, p.Package, p.Key, start, n, err)
		}
	}()
	for n = 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return zero, errors.Join(distlock.ErrNotAcquired, err)
		}
		if n == 1 {
			start = time.Now()
		}
		l, err := try(ctx)
		if err == nil {
			return l, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return zero, errors.Join(distlock.ErrNotAcquired, cerr)
		}
		if !errors.Is(err, distlock.ErrNotAcquired) {
			return zero, err
		}
		waited = true
		d := retry.Policy{BaseDelay: p.Min, MaxDelay: p.Max}.Backoff(n)
		if t == nil {
			t = time.NewTimer(d)
		} else {
			t.Reset(d)
		}
		select {
		case <-ctx.Done():
			return zero, errors.Join(distlock.ErrNotAcquired, ctx.Err())
		case <-p.Stop:
			return zero, ErrClosed(p.Package)
		case <-t.C:
		}
	}
}

// ReportWait reports an acquisition that had to wait — the lock was held
// when it started — to the hooks of ctx (observe.Hooks.LockWait): pkg and
// key name it, start is the time of its first attempt, attempts counts
// its tries (1 for a server-side wait), err is its outcome (nil:
// acquired). Without hooks it does nothing.
func ReportWait(ctx context.Context, pkg, key string, start time.Time, attempts int, err error) {
	if h := observe.FromContext(ctx); h != nil {
		h.OnLockWait(ctx, observe.LockWaitEvent{Package: pkg, Key: key, Wait: time.Since(start), Attempts: attempts, Err: err})
	}
}
