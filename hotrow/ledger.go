package hotrow

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/concurkit/concurkit/internal/handle"
)

// Transfer moves Amount (> 0) from account From to account To.
type Transfer[K cmp.Ordered] struct {
	From, To K
	Amount   int64
}

// Balances are the balances of a transfer's two accounts right after it
// (the batch's transfers apply in arrival order).
type Balances struct {
	From, To int64
}

// LedgerStore applies batches of transfers to one table's integer column.
// The adapters (hotrowpg, hotrowmysql) implement it.
type LedgerStore[K cmp.Ordered] interface {
	// Apply runs one transaction that locks the rows of keys (sorted,
	// distinct) in that order (FOR UPDATE), reads their values into v
	// (found[i] false, v[i] 0 for a missing row), calls plan(v, found)
	// once (plan changes v in place), writes the rows whose value changed
	// and commits. A transaction the database rolled back may be run
	// again, plan included (see Store.Locked). A commit whose outcome is
	// unknown is a *concurkit.AmbiguousCommitError.
	Apply(ctx context.Context, keys []K, plan func(v []int64, found []bool)) error
}

// A Ledger applies concurrent transfers between accounts in batches: one
// transaction per batch, which locks every account the batch touches in
// key order (so that batches of Ledgers in other processes cannot
// deadlock with it) and applies each transfer in arrival order with its
// own no-overdraft check. A lone transfer goes at once; while a batch is
// at the database the next transfers queue, and the batch after it takes
// them all (up to MaxBatch). One batch is at the database at a time.
//
// What a caller is told follows the Combiner's rules (see the package
// doc). Use NewLedger; a Ledger must not be copied.
type Ledger[K cmp.Ordered] struct {
	store   LedgerStore[K]
	floor   int64
	max     int
	timeout time.Duration

	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	queue   []*transfer[K]
	running bool
	closed  bool
	wg      sync.WaitGroup
}

type transfer[K cmp.Ordered] = pending[Transfer[K], Balances]

// NewLedger returns a Ledger applying batches through s. opts may be nil.
// For a Ledger a nil Options.Floor means 0: no account is overdrawn;
// AtLeast(math.MinInt64) lets balances go negative. It returns an error
// matching ErrInvalidArgument for a nil s or a negative MaxBatch or
// BatchTimeout.
func NewLedger[K cmp.Ordered](s LedgerStore[K], opts *Options) (*Ledger[K], error) {
	if handle.IsNil(s) {
		return nil, invalid("nil ledger store")
	}
	o, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	l := &Ledger[K]{store: s, max: o.MaxBatch, timeout: o.BatchTimeout}
	if o.Floor != nil {
		l.floor = *o.Floor
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l, nil
}

// Transfer moves t.Amount from t.From to t.To, in a batch with the other
// callers' transfers, and returns both balances right after it.
//
// Errors: ErrInsufficient (t.From would go below the floor; nothing was
// applied for t); ErrNotFound (an account has no row); ErrOverflow (t.To
// would pass the int64 maximum); an error matching ErrInvalidArgument for
// an Amount ≤ 0 or From == To; ErrClosed; ctx.Err() joined with
// ErrNotApplied when ctx ended while t still waited (it was never sent); a
// *concurkit.AmbiguousCommitError when ctx ended while its batch was at
// the database, or the batch's commit outcome is unknown; otherwise the
// store's error, shared by every transfer of the batch (none of them
// applied).
func (l *Ledger[K]) Transfer(ctx context.Context, t Transfer[K]) (Balances, error) {
	if t.Amount <= 0 {
		return Balances{}, invalid("transfer amount %d: want > 0", t.Amount)
	}
	if t.From == t.To {
		return Balances{}, invalid("transfer from account %v to itself", t.From)
	}
	if err := ctx.Err(); err != nil {
		return Balances{}, joinNotApplied(err)
	}
	r := newPending[Transfer[K], Balances](t)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return Balances{}, ErrClosed
	}
	l.queue = append(l.queue, r)
	if !l.running {
		l.running = true
		l.wg.Add(1)
		go l.run()
	}
	l.mu.Unlock()
	return r.await(ctx, &l.mu)
}

// run sends batches until the queue is empty.
func (l *Ledger[K]) run() {
	defer l.wg.Done()
	var batch []*transfer[K]
	for {
		batch = l.take(batch[:0])
		if len(batch) == 0 {
			return
		}
		l.apply(batch)
		answer(&l.mu, batch)
	}
}

// take moves up to max waiting transfers out of the queue; with none left
// it ends the run (the next Transfer starts a new one).
func (l *Ledger[K]) take(batch []*transfer[K]) []*transfer[K] {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := 0
	for ; i < len(l.queue) && len(batch) < l.max; i++ {
		if r := l.queue[i]; r.state != dropped {
			r.state = sent
			batch = append(batch, r)
		}
	}
	n := copy(l.queue, l.queue[i:])
	clear(l.queue[n:])
	l.queue = l.queue[:n]
	if len(batch) == 0 {
		l.running = false
	}
	return batch
}

// apply runs one batch and sets each transfer's balances or error.
func (l *Ledger[K]) apply(batch []*transfer[K]) {
	ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
	defer cancel()
	keys := make([]K, 0, 2*len(batch))
	for _, r := range batch {
		keys = append(keys, r.in.From, r.in.To)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	err := l.store.Apply(ctx, keys, func(v []int64, found []bool) {
		for _, r := range batch {
			r.out, r.err = l.plan(keys, v, found, r.in)
		}
	})
	if err != nil {
		fail(batch, err)
	}
}

// plan applies t to v (indexed like keys) when it fits.
func (l *Ledger[K]) plan(keys []K, v []int64, found []bool, t Transfer[K]) (Balances, error) {
	f, _ := slices.BinarySearch(keys, t.From)
	to, _ := slices.BinarySearch(keys, t.To)
	if !found[f] || !found[to] {
		return Balances{}, ErrNotFound
	}
	if !fits(v[f], -t.Amount, l.floor) {
		return Balances{}, ErrInsufficient
	}
	nt, ok := add(v[to], t.Amount)
	if !ok {
		return Balances{}, ErrOverflow
	}
	v[f] -= t.Amount // fits: at or above the floor, so in range
	v[to] = nt
	return Balances{From: v[f], To: nt}, nil
}

// Close stops accepting transfers (Transfer returns ErrClosed) and waits
// until the queued ones are answered. When ctx ends first it cancels the
// batch at the database (its callers are told the outcome is unknown),
// waits for it to return, and returns ctx.Err(). Calling Close again is
// safe.
func (l *Ledger[K]) Close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return closeWait(ctx, &l.wg, l.cancel)
}
