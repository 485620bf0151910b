package hotrow

import (
	"context"
	"sync"
	"time"

	"github.com/concurkit/concurkit/internal/handle"
)

// Options configure a Combiner. The zero value (or nil) means the defaults.
type Options struct {
	// Floor: a decrement that would take the value below *Floor is
	// refused with ErrInsufficient (increments are never refused). nil,
	// the default, means no floor (a counter). AtLeast(0) makes one.
	// For a Ledger, nil means AtLeast(0): no account is overdrawn.
	Floor *int64
	// MaxBatch bounds the requests of one batch. Default 1024.
	MaxBatch int
	// BatchTimeout bounds one batch at the database; a batch it ends
	// fails its requests as outcome unknown. Default 10 s.
	BatchTimeout time.Duration
}

// normalized returns a copy of o (nil: the zero Options) with the
// defaults filled in, or an error for a negative MaxBatch or BatchTimeout.
func (o *Options) normalized() (Options, error) {
	var n Options
	if o != nil {
		n = *o
	}
	if n.MaxBatch < 0 || n.BatchTimeout < 0 {
		return Options{}, invalid("negative MaxBatch (%d) or BatchTimeout (%v)", n.MaxBatch, n.BatchTimeout)
	}
	if n.MaxBatch == 0 {
		n.MaxBatch = defaultMaxBatch
	}
	if n.BatchTimeout == 0 {
		n.BatchTimeout = defaultBatchTimeout
	}
	return n, nil
}

// AtLeast returns a pointer to floor, for Options.Floor and the adapters'
// Add.
func AtLeast(floor int64) *int64 { return &floor }

const (
	defaultMaxBatch     = 1024
	defaultBatchTimeout = 10 * time.Second
)

// A Combiner coalesces concurrent Add calls on one key into batches: one
// statement and one commit per batch. A lone request goes at once; while a
// batch is at the database the next requests queue, and the batch after it
// takes them all (up to MaxBatch). There is no timer: the wait of a
// request is bounded by the batch before it.
//
// It runs one goroutine per key with requests in flight, which ends when
// the key's queue is empty. Close stops it. Use NewCombiner; a Combiner
// must not be copied.
type Combiner[K comparable] struct {
	store   Store[K]
	floor   *int64
	max     int
	timeout time.Duration

	ctx    context.Context // the batches'; cancelled by Close's deadline
	cancel context.CancelFunc

	mu     sync.Mutex
	keys   map[K]*queue
	closed bool
	wg     sync.WaitGroup
}

type queue struct{ pending []*request }

// request is one Add: its delta in, the value after it out.
type request = pending[int64, int64]

// NewCombiner returns a Combiner applying batches through s. opts may be
// nil. It returns an error matching ErrInvalidArgument for a nil s or a
// negative MaxBatch or BatchTimeout.
func NewCombiner[K comparable](s Store[K], opts *Options) (*Combiner[K], error) {
	if handle.IsNil(s) {
		return nil, invalid("nil store")
	}
	o, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	var floor *int64
	if o.Floor != nil {
		floor = AtLeast(*o.Floor)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Combiner[K]{
		store: s, floor: floor, max: o.MaxBatch, timeout: o.BatchTimeout,
		ctx: ctx, cancel: cancel, keys: map[K]*queue{},
	}, nil
}

// Add adds delta to key's value, in a batch with the other callers' updates
// of key, and returns the value right after its own update (the batch's
// updates apply in arrival order). A negative delta that would take the
// value below Options.Floor is refused with ErrInsufficient; the other
// requests of its batch still apply.
//
// Errors: ErrInsufficient; ErrOverflow (the value would leave the int64
// range); ErrNotFound; ErrClosed; ctx.Err() joined with ErrNotApplied when
// ctx ended while the request still waited (it was never sent); a
// *concurkit.AmbiguousCommitError when ctx ended while its batch was at the
// database, or the batch's commit outcome is unknown; otherwise the store's
// error, shared by every request of the batch (none of them applied).
func (c *Combiner[K]) Add(ctx context.Context, key K, delta int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, joinNotApplied(err)
	}
	r := newPending[int64, int64](delta)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, ErrClosed
	}
	q, ok := c.keys[key]
	if !ok {
		q = &queue{}
		c.keys[key] = q
		c.wg.Add(1)
		go c.run(key, q)
	}
	q.pending = append(q.pending, r)
	c.mu.Unlock()
	return r.await(ctx, &c.mu)
}

// run sends key's batches until its queue is empty.
func (c *Combiner[K]) run(key K, q *queue) {
	defer c.wg.Done()
	var batch []*request
	for {
		batch = c.take(key, q, batch[:0])
		if len(batch) == 0 {
			return
		}
		c.apply(key, batch)
		answer(&c.mu, batch)
	}
}

// take moves the next batch out of q: up to max requests whose callers
// still wait, stopping before a delta that would overflow the batch's sum.
// With nothing left it removes q from the map (the next Add starts a new
// run).
func (c *Combiner[K]) take(key K, q *queue, batch []*request) []*request {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum int64
	i := 0
	for ; i < len(q.pending) && len(batch) < c.max; i++ {
		r := q.pending[i]
		if r.state == dropped {
			continue
		}
		s, ok := add(sum, r.in)
		if !ok && len(batch) > 0 {
			break
		}
		sum = s
		r.state = sent
		batch = append(batch, r)
	}
	n := copy(q.pending, q.pending[i:])
	clear(q.pending[n:])
	q.pending = q.pending[:n]
	if len(batch) == 0 {
		delete(c.keys, key)
	}
	return batch
}

// apply runs one batch and sets each request's v or err.
func (c *Combiner[K]) apply(key K, batch []*request) {
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	deltas := make([]int64, len(batch))
	for i, r := range batch {
		deltas[i] = r.in
	}
	b, _ := NewBatch(c.floor != nil, deltas...) // take kept every running sum in range
	var floor int64
	if c.floor != nil {
		floor = *c.floor
	}
	v, ok, err := c.store.TryAdd(ctx, key, b, floor)
	if err != nil {
		fail(batch, err)
		return
	}
	if ok {
		// v is the value after the whole batch; walk back to each
		// request's own.
		after := v
		for i := len(batch) - 1; i >= 0; i-- {
			batch[i].out = after
			after -= batch[i].in
		}
		return
	}
	err = c.store.Locked(ctx, key, func(v int64) int64 {
		cur := v
		for _, r := range batch {
			r.out, r.err = 0, nil
			switch next, inRange := add(cur, r.in); {
			case !inRange:
				r.err = ErrOverflow
			case c.floor != nil && !fits(cur, r.in, *c.floor):
				r.err = ErrInsufficient
			default:
				cur, r.out = next, next
			}
		}
		return cur
	})
	if err != nil {
		fail(batch, err)
	}
}

// Close stops accepting requests (Add returns ErrClosed) and waits until
// the queued ones are answered. When ctx ends first it cancels the batches
// at the database (their callers are told the outcome is unknown), waits
// for them to return, and returns ctx.Err(). Calling Close again is safe.
func (c *Combiner[K]) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return closeWait(ctx, &c.wg, c.cancel)
}
