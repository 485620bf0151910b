package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/distlock/internal/redisnode"
	"github.com/concurkit/concurkit/distlock/internal/sentinel"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/observe"
)

// LockKey returns the Redis key that holds the lock on key on each
// master: "ck:{E}:lock", where E is key with '%', '{' and '}'
// percent-encoded; the same layout as package distlock/redislock.
func LockKey(key string) string { return redisnode.LockKey(key) }

// FenceKey returns the Redis key that records, on each master, the highest
// fencing token that acquired key: "ck:{E}:fence".
func FenceKey(key string) string { return redisnode.FenceKey(key) }

// Default values of the zero Config fields.
const (
	DefaultNodeTimeout    = 50 * time.Millisecond
	DefaultDriftFactor    = 0.01
	DefaultPollMin        = 5 * time.Millisecond
	DefaultPollMax        = 100 * time.Millisecond
	DefaultFenceTTL       = 24 * time.Hour
	DefaultCleanupTimeout = time.Second
)

// driftConst is the constant part of the clock-drift allowance (Redlock
// paper: 2 ms for the granularity of the Redis expire clock).
const driftConst = 2 * time.Millisecond

// ErrNoQuorum ["no_quorum" for observe.ErrorType] is returned by Extend
// and Release when fewer than a majority of the masters answered, so the
// outcome is unknown: it matches concurkit.ErrOutcomeUnknown. Extend
// leaves the lease running until its current deadline; after Release the
// lock expires by its TTL on the masters that did not answer. (An
// acquisition that cannot reach a quorum is not acquired: it returns
// distlock.ErrNotAcquired, with the masters' tally in the message.)
var ErrNoQuorum error = sentinel.New("redlock: no quorum", "no_quorum", concurkit.ErrOutcomeUnknown)

// Config tunes a Locker. A zero field means the documented default; a
// negative duration or a DriftFactor outside [0, 1) is bad input (an error
// matching concurkit.ErrInvalidArgument). Source has no default: it is
// required, so a nil *Config is an error too. New copies the Config.
type Config struct {
	// Source mints the fencing tokens (required): a fenced.Source shared
	// by every Locker of the same lock keys, e.g. a PostgreSQL sequence
	// (package fenced). Redis masters cannot give out tokens that survive
	// their restarts; see the package doc for why a token is minted before
	// the lock is taken.
	Source fenced.Source
	// NodeTimeout is how long an acquire or extend attempt waits for a
	// master's answer, and how long Release waits for the masters beyond
	// a majority. It is enforced by the locker, whatever the client
	// options: a master that has not answered by then counts as failed
	// and its request finishes in the background. Zero means a fiftieth
	// of the lock's TTL, at least DefaultNodeTimeout (50 ms): 200 ms for
	// the default 10 s TTL, which costs at most 2% of the validity and
	// rides out the scheduling delays of a busy machine (a fixed 50 ms
	// failed a third of the masters of a 10 s lock under a load average of
	// 20). Keep it far below the TTL: a slow master must not eat the
	// validity.
	NodeTimeout time.Duration
	// DriftFactor scales the clock-drift allowance DriftFactor·TTL + 2 ms
	// subtracted from the validity. Zero means DefaultDriftFactor (0.01);
	// it must be below 1.
	DriftFactor float64
	// Margin is a further safety margin subtracted from a lease's validity
	// so its Context ends before a master may give the lock away. Zero
	// means 10% of the TTL, at most one second.
	Margin time.Duration
	// PollMin and PollMax bound the full-jitter backoff between the
	// attempts of Acquire: after the n-th failed attempt it waits a random
	// time in [0, min(PollMax, PollMin·2^(n-1))]. Zero means
	// DefaultPollMin (5 ms) and DefaultPollMax (100 ms), wider than a
	// single server's: an attempt costs a request per master, and waiters
	// that retry too close together split the masters' votes so that
	// nobody wins.
	PollMin, PollMax time.Duration
	// FenceTTL is how long each master's fence key (the highest token that
	// acquired a lock key) outlives the lock: every acquisition and
	// extension makes it live at least the lock's TTL plus FenceTTL from
	// then, so it lives as long as the lock is held, however often it is
	// extended, and FenceTTL past the lock's release or expiry. Zero means
	// DefaultFenceTTL (24 h).
	FenceTTL time.Duration
	// CleanupTimeout bounds each master's compare-and-delete on Release,
	// and so how long Release waits for a majority to answer. The deletes
	// run in the background: neither Acquire nor Release waits for a
	// master beyond NodeTimeout once a majority has answered. A Release
	// delete that gives up leaves the lock on that master until its TTL.
	// The delete of a failed attempt's lock on a master (sent once that
	// master's acquire request returned) is retried until the master
	// answers, for up to the lock's TTL but at least CleanupTimeout; the
	// failed attempt waits for those that accepted it, at most
	// CleanupTimeout. Zero means DefaultCleanupTimeout (1 s).
	CleanupTimeout time.Duration
}

func (c *Config) resolve() (Config, error) {
	var o Config
	if c != nil {
		o = *c
	}
	if handle.IsNil(o.Source) {
		return o, fmt.Errorf("%w: redlock: nil Config.Source (required: a fenced.Source for the fencing tokens)", concurkit.ErrInvalidArgument)
	}
	err := redisnode.ResolveDurations(pkg,
		redisnode.Duration{Name: "NodeTimeout", Field: &o.NodeTimeout}, // zero: per TTL (nodeTimeout)
		redisnode.Duration{Name: "Margin", Field: &o.Margin},
		redisnode.Duration{Name: "PollMin", Field: &o.PollMin, Default: DefaultPollMin},
		redisnode.Duration{Name: "PollMax", Field: &o.PollMax, Default: DefaultPollMax},
		redisnode.Duration{Name: "FenceTTL", Field: &o.FenceTTL, Default: DefaultFenceTTL},
		redisnode.Duration{Name: "CleanupTimeout", Field: &o.CleanupTimeout, Default: DefaultCleanupTimeout})
	if err != nil {
		return o, err
	}
	if o.DriftFactor < 0 || o.DriftFactor >= 1 || o.DriftFactor != o.DriftFactor {
		return o, fmt.Errorf("%w: redlock: Config.DriftFactor %v not in [0, 1)", concurkit.ErrInvalidArgument, o.DriftFactor)
	}
	if o.DriftFactor == 0 {
		o.DriftFactor = DefaultDriftFactor
	}
	return o, nil
}

// Locker hands out leases held on a majority of independent Redis masters.
// It is safe for concurrent use; each Acquire returns a fresh
// distlock.Lease.
type Locker struct {
	nodes   []goredis.Scripter
	quorum  int
	cfg     Config
	scripts *redisnode.Scripts
	bg      redisnode.Background // requests that outlive the call that made them
}

var (
	_ distlock.Locker = (*Locker)(nil)
	_ distlock.Closer = (*Locker)(nil)
)

// New returns a Locker over nodes, one client per independent master
// (typically *redis.Client of github.com/redis/go-redis/v9; not replicas of
// one another, not a cluster), minting fencing tokens from cfg.Source. The
// quorum is len(nodes)/2+1. Any client options work: the locker bounds
// each master's request with NodeTimeout itself (with
// Options.ContextTimeoutEnabled a request given up on also ends at once
// instead of at the client's ReadTimeout, freeing its connection sooner).
// It does no I/O. It returns an error matching
// concurkit.ErrInvalidArgument for no nodes, a nil node (also a typed nil
// such as a nil *redis.Client), a nil cfg or cfg.Source, or an invalid
// Config field.
func New[C goredis.Scripter](nodes []C, cfg *Config) (*Locker, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: redlock: no nodes", concurkit.ErrInvalidArgument)
	}
	ns := make([]goredis.Scripter, len(nodes))
	for i, n := range nodes {
		if handle.IsNil(n) {
			return nil, fmt.Errorf("%w: redlock: nil client (node %d)", concurkit.ErrInvalidArgument, i)
		}
		ns[i] = n
	}
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Locker{
		nodes:   ns,
		quorum:  len(ns)/2 + 1,
		cfg:     c,
		scripts: redisnode.NewScripts(),
	}, nil
}

// pkg names the package in errors and observe events.
const pkg = "redlock"

// check rejects a nil Locker or one not made by New, before any I/O.
func (l *Locker) check() error {
	if l == nil || l.scripts == nil {
		return fmt.Errorf("%w: redlock: nil or zero Locker (use New)", concurkit.ErrInvalidArgument)
	}
	return nil
}

// Close releases the leases of the Locker still held, ends waiting Acquire
// calls (with distlock.ErrClosed), refuses later ones, and waits for the
// requests and cleanups the Locker left running in the background — a
// slow master's request and the delete that follows it, retried until the
// master answers or the lock's TTL passed — or until ctx ends. See
// distlock.Closer for what it returns. The clients are not closed. A nil
// Locker's Close returns nil.
func (l *Locker) Close(ctx context.Context) error {
	if l == nil || l.scripts == nil {
		return nil
	}
	return l.bg.Close(ctx, pkg)
}

// nodeTimeout is Config.NodeTimeout, or the default for a lock of ttl.
func (l *Locker) nodeTimeout(ttl time.Duration) time.Duration {
	if l.cfg.NodeTimeout > 0 {
		return l.cfg.NodeTimeout
	}
	return max(DefaultNodeTimeout, ttl/50)
}

// Quorum returns the number of masters that must hold a lock: N/2+1 (0
// for a nil Locker).
func (l *Locker) Quorum() int {
	if l == nil {
		return 0
	}
	return l.quorum
}

// Acquire blocks until the lock on key is held by a majority of the masters
// within its validity, or ctx ends. An attempt is decided as soon as a
// majority accepted (or can no longer accept), without waiting for the
// other masters; a master that has not answered within NodeTimeout counts
// as failed. Failed attempts (busy, no majority, validity used up, masters
// down) are retried with full-jitter backoff (Config.PollMin/PollMax);
// the attempt's lock is deleted in the background on every master that
// took it or did not answer, each delete sent after that master's acquire
// request returned and retried until the master answers (see the package
// doc, Hung masters). A retry first asks one random master and goes on to
// the others only if that one accepted (or did not answer), so polling a
// busy lock costs one request per poll.
//
// It returns distlock.ErrInvalidKey for an empty key, an error matching
// concurkit.ErrInvalidArgument for a negative TTL or one too short to
// leave any validity (and for a nil Locker),
// errors.Join(distlock.ErrNotAcquired, ctx.Err()) when ctx ends first,
// distlock.ErrTokenExhausted when the token source is used up, and the
// wrapped error of the token source when it fails.
//
// An Acquire whose first attempt failed reports its wait to the hooks of
// ctx (observe.Hooks.LockWait), and the lease reports its extensions and
// its loss to them (see distlock.Locker).
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := l.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	if l.bg.Closed() {
		return nil, lease.ErrClosed(pkg)
	}
	st := attempts{keys: redisnode.NewKeys(key)}
	ls, err := lease.Poll(ctx, lease.PollPolicy{Min: l.cfg.PollMin, Max: l.cfg.PollMax, Package: pkg, Key: key, Stop: l.bg.Done()},
		func(ctx context.Context) (*lease.Lease, error) { return l.try(ctx, key, o, &st) })
	if err != nil {
		return nil, err
	}
	return ls, nil
}

// TryAcquire makes one attempt with a freshly minted token. It returns an
// error matching distlock.ErrNotAcquired as soon as no majority can be
// reached (the lock is held, or too many masters are down or do not
// answer within NodeTimeout), and otherwise the errors of Acquire. It
// never waits for the cleanup of a failed attempt.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := l.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	if l.bg.Closed() {
		return nil, lease.ErrClosed(pkg)
	}
	st := attempts{keys: redisnode.NewKeys(key)}
	ls, err := l.try(ctx, key, o, &st)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return ls, nil
}

// drift is DriftFactor·ttl + 2 ms, saturated at math.MaxInt64 (a TTL near
// math.MaxInt64 with a DriftFactor near 1 would otherwise overflow).
func (l *Locker) drift(ttl time.Duration) time.Duration {
	f := l.cfg.DriftFactor * float64(ttl)
	if f >= float64(math.MaxInt64-driftConst) {
		return math.MaxInt64
	}
	return min(time.Duration(f), math.MaxInt64-driftConst) + driftConst
}

func (l *Locker) margin(ttl time.Duration) time.Duration {
	if l.cfg.Margin > 0 {
		return l.cfg.Margin
	}
	return lease.DefaultMargin(ttl)
}

func (l *Locker) resolve(key string, opts *distlock.Options) (distlock.Options, error) {
	if err := l.check(); err != nil {
		return distlock.Options{}, err
	}
	o, err := lease.Resolve(pkg, key, opts)
	if err != nil {
		return o, err
	}
	// Masters get the TTL rounded up to whole milliseconds, so they hold
	// the lock at least as long as the validity counted from o.TTL.
	if redisnode.NoValidity(o.TTL, l.drift(o.TTL), l.margin(o.TTL)) {
		return o, fmt.Errorf("%w: redlock: TTL %v leaves no validity after drift and margin", concurkit.ErrInvalidArgument, o.TTL)
	}
	return o, nil
}

// reply is one master's answer.
type reply struct {
	n   int64
	err error
}

// tally counts the replies: yes = 1, no = 0, stale = -1, failed = errors
// (and masters that did not answer in time).
type tally struct {
	yes, no, stale, failed int
	firstErr               error
}

func (t *tally) add(r reply) {
	switch {
	case r.err != nil:
		t.failed++
		if t.firstErr == nil {
			t.firstErr = r.err
		}
	case r.n == redisnode.Acquired:
		t.yes++
	case r.n == redisnode.Stale:
		t.stale++
	default:
		t.no++
	}
}

// errNoAnswer is the error counted for a master that did not answer
// within NodeTimeout.
var errNoAnswer = errors.New("no answer within the node timeout")

// timedOut counts the masters still pending as failed.
func (t *tally) timedOut(pending int) {
	t.failed += pending
	if pending > 0 && t.firstErr == nil {
		t.firstErr = errNoAnswer
	}
}

// op is one script call on one master.
type op func(ctx context.Context, c goredis.Scripter) (int64, error)

// ask sends op to each master in idx, each from its own goroutine, and
// returns at once. The requests share one context that ends at deadline
// (or with ctx); it is the context the caller waits on too. Every reply
// goes to out, which must have room for all of them, so a goroutine never
// blocks on a caller that stopped listening. With a flight f (acquire
// requests), each goroutine also does f's bookkeeping and cleanup (see
// flight). The goroutines outlive ask: a master whose client ignores
// context deadlines (go-redis without ContextTimeoutEnabled) keeps its
// request until the client's own timeout, but nobody waits for it.
func (l *Locker) ask(ctx context.Context, deadline time.Time, idx []int, do op, out chan<- reply, f *flight) context.Context {
	rctx, cancel := context.WithDeadline(ctx, deadline)
	var left atomic.Int32
	left.Store(int32(len(idx)))
	finished := func() {
		if left.Add(-1) <= 0 {
			cancel() // the last request returned: free the timer
		}
	}
	if len(idx) == 0 {
		finished()
	}
	for _, i := range idx {
		l.bg.Go(func() {
			var r reply
			r.n, r.err = do(rctx, l.nodes[i])
			var done, drop, counted bool
			if f != nil {
				// Before the send: the decision may follow it at once.
				done, drop, counted = f.returned(i, r.err == nil && r.n == redisnode.Acquired)
			}
			out <- r
			finished() // after the send: a caller that sees rctx end finds every reply in out
			if f != nil {
				l.settle(ctx, f, i, r, done, drop)
				if counted {
					f.settled()
				}
			}
		})
	}
	return rctx
}

// gather receives replies from in until enough says the outcome is
// decided, pending reaches zero, or ctx ends (then the replies already
// sent are still counted). It returns the number of replies still
// pending.
func gather(ctx context.Context, in <-chan reply, pending int, t *tally, enough func(*tally) bool) int {
	for pending > 0 && !enough(t) {
		select {
		case r := <-in:
			pending--
			t.add(r)
		case <-ctx.Done():
			for pending > 0 {
				select {
				case r := <-in:
					pending--
					t.add(r)
				default:
					return pending
				}
			}
		}
	}
	return pending
}

// flight is one acquisition attempt's lock on the masters, shared by the
// attempt, its per-master goroutines (which may outlive it) and, once
// acquired, the lease's Release. It makes sure every master where the
// lock may have landed gets a compare-and-delete when the lock must go,
// sent only after that master's acquire request returned (a delete sent
// while the SET is still queued could run first and leave the lock
// behind until its TTL).
type flight struct {
	keys    redisnode.Keys
	value   string
	tok     fenced.Token
	ttl     time.Duration
	decided chan struct{} // closed when the attempt is decided; failed is set before

	mu       sync.Mutex
	failed   bool   // the attempt did not acquire
	done     bool   // decided (guarded copy of the channel's state)
	drop     bool   // the lock must go: failed, or released
	inflight []bool // master i's acquire request has not returned yet
	// undo counts the masters that answered "acquired" while the lock
	// might have to go (undecided, or dropped) and have not yet been
	// through settle; undone, when a failed attempt waits, is closed as
	// undo reaches zero.
	undo   int
	undone chan struct{}
}

func (l *Locker) newFlight(keys redisnode.Keys, value string, tok fenced.Token, ttl time.Duration) *flight {
	return &flight{keys: keys, value: value, tok: tok, ttl: ttl, decided: make(chan struct{}), inflight: make([]bool, len(l.nodes))}
}

// decide records the attempt's outcome and releases the goroutines that
// wait for it.
func (f *flight) decide(failed bool) {
	f.mu.Lock()
	f.failed, f.done, f.drop = failed, true, failed
	f.mu.Unlock()
	close(f.decided)
}

// returned records that master i's acquire request returned, and whether
// that master took the lock, and reports whether the attempt was already
// decided and, if so, whether the lock must go. counted says the master
// is in undo: settle's caller must call settled.
func (f *flight) returned(i int, took bool) (done, drop, counted bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight[i] = false
	if took && (!f.done || f.drop) {
		f.undo++
		counted = true
	}
	return f.done, f.drop, counted
}

// settled records that a master counted in undo has been through settle
// (its delete answered or gave up, or the attempt succeeded).
func (f *flight) settled() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.undo--; f.undo == 0 && f.undone != nil {
		close(f.undone)
		f.undone = nil
	}
}

// awaitUndo waits until every master that accepted the failed attempt
// has been through its delete, at most bound, or until ctx ends. Without
// it a TryAcquire right after a failed one (or the holder's Release) could
// meet the failed attempt's value on the masters that took it.
func (f *flight) awaitUndo(ctx context.Context, bound time.Duration) {
	f.mu.Lock()
	if f.undo == 0 {
		f.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	f.undone = ch
	f.mu.Unlock()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// settle runs in master i's goroutine after its acquire reply r was
// sent: it deletes the lock there when the attempt failed, or when the
// lease was released while the request was in flight, and r says the lock
// may be there. A reply that came before the decision waits for it (the
// coordinator decides at once); after a success a later Release finds
// inflight[i] false and deletes on master i itself.
func (l *Locker) settle(ctx context.Context, f *flight, i int, r reply, done, drop bool) {
	if !done {
		<-f.decided
		drop = f.failed
	}
	if drop && (r.err != nil || r.n == redisnode.Acquired) {
		l.del(ctx, i, f, r.err != nil)
	}
}

// del deletes the flight's lock on master i if it still holds its value,
// on a context the caller's cancellation cannot cut short, trying until
// the master answers, for up to the lock's TTL (at least CleanupTimeout):
// a master frozen right after it took the lock still loses it when it
// thaws in that time. After an acquire request that failed (unknown: its
// SET may still be queued in the master, behind or ahead of this delete)
// it retires the token instead (redisnode.Scripts.Retire), so that the
// SET is refused should it run after the delete; after one that answered
// "acquired" the SET ran already, and a compare-and-delete leaves the
// token usable for the next attempt.
func (l *Locker) del(ctx context.Context, i int, f *flight, unknown bool) {
	until := time.Now().Add(max(f.ttl, l.cfg.CleanupTimeout))
	_, _ = redisnode.Persist(context.WithoutCancel(ctx), until, func(ctx context.Context) (int64, error) {
		if unknown {
			return l.scripts.Retire(ctx, l.nodes[i], f.keys, f.value, f.tok, f.ttl, l.cfg.FenceTTL)
		}
		return l.scripts.Release(ctx, l.nodes[i], f.keys, f.value)
	})
}

// attempts is the state Acquire carries from one attempt to the next.
type attempts struct {
	keys redisnode.Keys
	tok  fenced.Token // reused while the lock is busy, re-minted when stale
	n    int          // attempts made
}

// acquireOn runs the acquire script on the masters and returns as soon as
// a majority accepted, a majority can no longer accept, NodeTimeout
// passed (or the validity budget, whichever is sooner) or ctx ended. On a
// retry (probe) it first asks one random master alone and stops there if
// that master refuses: a waiter polling a busy lock then costs one
// request per poll instead of N. The probe is part of the attempt: its
// time counts against the validity like the rest.
func (l *Locker) acquireOn(ctx context.Context, f *flight, probe bool, start time.Time, budget time.Duration, do op) tally {
	n := len(l.nodes)
	out := make(chan reply, n)
	deadline := func() time.Time {
		if d, end := time.Now().Add(l.nodeTimeout(f.ttl)), start.Add(budget); d.Before(end) {
			return d
		}
		return start.Add(budget)
	}
	decided := func(t *tally) bool { return t.yes >= l.quorum || t.no+t.stale+t.failed > n-l.quorum }
	setInflight := func(idx []int) {
		f.mu.Lock()
		for _, i := range idx {
			f.inflight[i] = true
		}
		f.mu.Unlock()
	}
	var t tally
	idx := make([]int, 0, n)
	pending := 0
	if probe && n > 1 {
		p := rand.IntN(n)
		setInflight([]int{p})
		rctx := l.ask(ctx, deadline(), []int{p}, do, out, f)
		pending = gather(rctx, out, 1, &t, func(t *tally) bool { return false })
		if pending == 0 && t.failed == 0 && t.yes == 0 {
			return t // busy or stale there: this attempt cannot be trusted to win
		}
		if ctx.Err() != nil {
			t.timedOut(pending)
			return t
		}
		// It accepted, failed or did not answer (its late reply still
		// counts): ask the others.
		for i := range n {
			if i != p {
				idx = append(idx, i)
			}
		}
	} else {
		for i := range n {
			idx = append(idx, i)
		}
	}
	setInflight(idx)
	rctx := l.ask(ctx, deadline(), idx, do, out, f)
	pending = gather(rctx, out, pending+len(idx), &t, decided)
	t.timedOut(pending)
	return t
}

// try makes one acquisition attempt; see redislock.Locker for the token
// rule.
func (l *Locker) try(ctx context.Context, key string, o distlock.Options, st *attempts) (*lease.Lease, error) {
	st.n++
	probe := st.n > 1
	drift, margin := l.drift(o.TTL), l.margin(o.TTL)
	budget := o.TTL - drift - margin // > 0: checked by resolve
	return redisnode.Attempt(ctx, l.cfg.Source, pkg, key, &st.tok, func(tok fenced.Token, value string) (*lease.Lease, bool, error) {
		f := l.newFlight(st.keys, value, tok, o.TTL)
		start := time.Now() // every master's TTL starts no earlier than this
		t := l.acquireOn(ctx, f, probe, start, budget, func(ctx context.Context, c goredis.Scripter) (int64, error) {
			return l.scripts.Acquire(ctx, c, st.keys, value, o.TTL, tok, l.cfg.FenceTTL)
		})
		if t.yes >= l.quorum && time.Since(start) < budget {
			ls, err := l.newLease(observe.FromContext(ctx), key, f, tok, o, start, drift, margin)
			if err == nil {
				f.decide(false)
				return ls, false, nil
			}
			f.decide(true)
			return nil, false, err
		}
		// Failed: every master that took the lock or did not answer
		// deletes it, in the background, once its request returned. The
		// attempt returns once the masters that took it have answered
		// their delete (at most CleanupTimeout), not on cancellation.
		f.decide(true)
		if cerr := ctx.Err(); cerr != nil {
			return nil, false, errors.Join(distlock.ErrNotAcquired, cerr)
		}
		f.awaitUndo(ctx, l.cfg.CleanupTimeout)
		// A higher token already acquired on some master: mint anew.
		return nil, t.stale > 0, l.notAcquired(key, t)
	})
}

// notAcquired is the error of an attempt that did not reach a quorum.
func (l *Locker) notAcquired(key string, t tally) error {
	if t.firstErr != nil {
		return fmt.Errorf("%w: redlock: %q: %d of %d masters accepted (quorum %d; %d busy, %d stale token, %d failed, first: %v)",
			distlock.ErrNotAcquired, key, t.yes, len(l.nodes), l.quorum, t.no, t.stale, t.failed, t.firstErr)
	}
	return fmt.Errorf("%w: redlock: %q: %d of %d masters accepted (quorum %d; %d busy, %d stale token)",
		distlock.ErrNotAcquired, key, t.yes, len(l.nodes), l.quorum, t.no, t.stale)
}

// release deletes the flight's lock on every master where it holds its
// value. Masters whose acquire request is still in flight are left to
// that request's goroutine, which deletes after it (drop is set here).
// It waits for every master it asked, but past NodeTimeout only until a
// majority has answered, and never past ctx or CleanupTimeout; the
// deletes it stops waiting for go on in the background. It returns the
// tally and the number of masters that did not answer.
func (l *Locker) release(ctx context.Context, f *flight) (tally, int) {
	n := len(l.nodes)
	f.mu.Lock()
	f.drop = true
	idx := make([]int, 0, n)
	for i, busy := range f.inflight {
		if !busy {
			idx = append(idx, i)
		}
	}
	f.mu.Unlock()
	out := make(chan reply, len(idx))
	// The deletes are not cut short by the caller (ctx may end the wait,
	// not the cleanup), only by CleanupTimeout.
	start := time.Now()
	rctx := l.ask(context.WithoutCancel(ctx), start.Add(l.cfg.CleanupTimeout), idx, func(ctx context.Context, c goredis.Scripter) (int64, error) {
		n, err := l.scripts.Release(ctx, c, f.keys, f.value)
		if n == redisnode.Emptied {
			// A master that lost its data (restarted empty) holds
			// nothing of ours and saw nobody after us: released.
			n = redisnode.Released
		}
		return n, err
	}, out, nil)
	wctx, cancel := context.WithDeadline(ctx, start.Add(min(l.nodeTimeout(f.ttl), l.cfg.CleanupTimeout)))
	defer cancel()
	var t tally
	all := func(*tally) bool { return false }
	pending := gather(wctx, out, len(idx), &t, all)
	if pending > 0 && ctx.Err() == nil {
		// Past NodeTimeout: wait on only until a majority answered.
		wctx, cancel := mergeDone(ctx, rctx)
		defer cancel()
		pending = gather(wctx, out, pending, &t, func(t *tally) bool { return t.yes+t.no >= l.quorum })
	}
	t.timedOut(pending)
	return t, pending + (n - len(idx))
}

// mergeDone returns a context that ends when ctx or other ends.
func mergeDone(ctx, other context.Context) (context.Context, context.CancelFunc) {
	m, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(other, cancel)
	return m, func() { stop(); cancel() }
}

func (l *Locker) newLease(hooks *observe.Hooks, key string, f *flight, tok fenced.Token, o distlock.Options, start time.Time, drift, margin time.Duration) (*lease.Lease, error) {
	n := len(l.nodes)
	// The lease's own cleanup bound stays distlock.DefaultCleanupTimeout:
	// the Release callback bounds its requests by Config.CleanupTimeout.
	return lease.New(lease.Config{
		Package:    pkg,
		Group:      &l.bg,
		Hooks:      hooks,
		Key:        key,
		Token:      tok,
		TTL:        o.TTL,
		Start:      start,
		Drift:      drift,
		Margin:     margin,
		AutoExtend: o.AutoExtend,
		Backend: lease.Backend{
			Extend: func(ctx context.Context, ttl time.Duration) error {
				if drift := l.drift(ttl); ttl <= drift {
					// PX would be (near) zero: the lock would vanish at once.
					return fmt.Errorf("%w: redlock: TTL %v leaves no validity after the drift %v", concurkit.ErrInvalidArgument, ttl, drift)
				}
				start := time.Now()
				out := make(chan reply, n)
				all := make([]int, n)
				for i := range all {
					all[i] = i
				}
				rctx := l.ask(ctx, start.Add(l.nodeTimeout(ttl)), all, func(ctx context.Context, c goredis.Scripter) (int64, error) {
					return l.scripts.Extend(ctx, c, f.keys, f.value, ttl, l.cfg.FenceTTL)
				}, out, nil)
				var t tally
				// Decided once a majority renewed or can no longer renew.
				t.timedOut(gather(rctx, out, n, &t, func(t *tally) bool { return t.yes >= l.quorum || t.no > n-l.quorum }))
				switch {
				case t.yes >= l.quorum && !redisnode.NoValidity(ttl-time.Since(start), l.drift(ttl), 0):
					return nil
				case t.no > n-l.quorum:
					// A majority can no longer be ours.
					return fmt.Errorf("%w: redlock: %q held by this lease on %d of %d masters", distlock.ErrLeaseLost, key, t.yes, n)
				case ctx.Err() != nil:
					return fmt.Errorf("%w: extend %q: %d of %d masters renewed: %w", ErrNoQuorum, key, t.yes, n, ctx.Err())
				case t.firstErr != nil:
					return fmt.Errorf("%w: extend %q: %d of %d masters renewed (first error: %v)", ErrNoQuorum, key, t.yes, n, t.firstErr)
				}
				return fmt.Errorf("%w: extend %q: %d of %d masters renewed", ErrNoQuorum, key, t.yes, n)
			},
			Release: func(ctx context.Context) error {
				t, missing := l.release(ctx, f)
				switch {
				case t.no >= l.quorum:
					// A majority says another holder acquired it since (a
					// master where the successor's SET had not landed yet
					// may still have counted ours as released).
					return fmt.Errorf("%w: redlock: %q was no longer held by this lease (another holder acquired it since)", distlock.ErrLeaseLost, key)
				case t.yes > 0 && t.yes+t.no >= l.quorum:
					return nil
				case t.firstErr != nil:
					return fmt.Errorf("%w: release %q: %d of %d masters answered (%d did not; first error: %v)", ErrNoQuorum, key, t.yes+t.no, n, missing, t.firstErr)
				}
				return fmt.Errorf("%w: release %q: %d of %d masters answered", ErrNoQuorum, key, t.yes+t.no, n)
			},
		},
	})
}
