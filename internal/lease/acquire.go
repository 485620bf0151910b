package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/retry"
)

// Resolve validates key and opts and returns a copy of the options with
// defaults applied (nil opts or zero TTL → distlock.DefaultTTL). It never
// modifies *opts. It returns distlock.ErrInvalidKey for an empty key and
// distlock.ErrInvalidOptions for a negative TTL.
func Resolve(key string, opts *distlock.Options) (distlock.Options, error) {
	var o distlock.Options
	if opts != nil {
		o = *opts
	}
	if key == "" {
		return o, fmt.Errorf("%w: empty key", distlock.ErrInvalidKey)
	}
	if o.TTL < 0 {
		return o, fmt.Errorf("%w: TTL %v < 0", distlock.ErrInvalidOptions, o.TTL)
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
// Zero fields mean DefaultPollMin and DefaultPollMax.
type PollPolicy struct {
	Min, Max time.Duration
}

// Poll calls try until it returns a lease, an error that does not match
// distlock.ErrNotAcquired, or ctx ends; in the last case it returns
// errors.Join(distlock.ErrNotAcquired, ctx.Err()) (and a lease try may
// have returned together with an error is never leaked: try must not
// return both). Backends that can wait on a server-side event (ZooKeeper
// watches, etcd revisions) do not need it.
func Poll[L any](ctx context.Context, p PollPolicy, try func(ctx context.Context) (L, error)) (L, error) {
	if p.Min <= 0 {
		p.Min = DefaultPollMin
	}
	if p.Max <= 0 {
		p.Max = DefaultPollMax
	}
	p.Max = max(p.Max, p.Min)
	var zero L
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return zero, errors.Join(distlock.ErrNotAcquired, err)
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
		d := retry.Policy{BaseDelay: p.Min, MaxDelay: p.Max}.Backoff(n)
		if t == nil {
			t = time.NewTimer(d)
		} else {
			t.Reset(d)
		}
		select {
		case <-ctx.Done():
			return zero, errors.Join(distlock.ErrNotAcquired, ctx.Err())
		case <-t.C:
		}
	}
}
