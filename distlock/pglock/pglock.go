package pglock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic"
)

// pkg names the package in errors and observe events.
const pkg = "pglock"

// DefaultSequence is the token sequence used when Config.Sequence is empty.
const DefaultSequence = "concurkit_lock_token_seq"

// Default polling delays of a waiting Acquire (Config.PollMin/PollMax).
const (
	DefaultPollMin = time.Millisecond
	DefaultPollMax = 50 * time.Millisecond
)

// MaxTTL is the longest lease TTL: the maximum of PostgreSQL's
// idle_session_timeout, INT_MAX milliseconds (about 24.8 days). A longer
// TTL is rejected rather than clamped, because a server timeout shorter
// than the lease's own validity would end the session while the holder
// still believes it holds the lock.
const MaxTTL = math.MaxInt32 * time.Millisecond

// SessionLossBound is how long after the server ended a lease's session
// (pg_terminate_backend, a crash, a failover: the lock is free at once) the
// lease may still report Valid: the time for its watcher goroutine to read
// the closed connection, milliseconds on a running process, bounded here
// with room for a loaded machine. A process paused longer (GC, SIGSTOP)
// learns later; fencing tokens keep storage safe either way.
const SessionLossBound = 2 * time.Second

// Config configures a Locker. A nil *Config or a zero field means the
// documented default; an invalid field is bad input (an error matching
// concurkit.ErrInvalidArgument). New copies it.
type Config struct {
	// Schema optionally qualifies Sequence.
	Schema string
	// Sequence is the token sequence; empty means DefaultSequence
	// ("concurkit_lock_token_seq"). It is created on first use if missing
	// (CREATE SEQUENCE IF NOT EXISTS), or by the migrations.
	Sequence string
	// PollMin and PollMax bound the full-jitter backoff between the
	// try-locks of a waiting Acquire (see the package doc for why it
	// polls). Zero means DefaultPollMin (1 ms) and DefaultPollMax (50 ms).
	PollMin, PollMax time.Duration
	// CleanupTimeout bounds Release's cleanup (the unlock on the lease's
	// session), which ignores the cancellation of the caller's context; a
	// session whose unlock does not finish in time is closed, which frees
	// the lock. Zero means distlock.DefaultCleanupTimeout (5 s).
	CleanupTimeout time.Duration
}

// Locker hands out advisory-lock leases. It is safe for concurrent use.
// Each held lease keeps one pool connection until it is released or lost;
// an Acquire that is waiting holds none (see the package doc).
type Locker struct {
	pool *pgxpool.Pool
	seq  string // quoted
	cfg  Config
	bg   lease.Group // leases handed out, their session goroutines (Close)
}

var (
	_ distlock.Locker = (*Locker)(nil)
	_ distlock.Closer = (*Locker)(nil)
)

// New returns a Locker on pool, which hands a connection to each held lease
// (a session-level advisory lock lives on one session). It does no I/O. It
// returns an error matching concurkit.ErrInvalidArgument for a nil pool,
// an invalid sequence name or a negative Config duration.
func New(pool *pgxpool.Pool, cfg *Config) (*Locker, error) {
	if pool == nil {
		return nil, errNilPool
	}
	var o Config
	if cfg != nil {
		o = *cfg
	}
	if o.PollMin < 0 || o.PollMax < 0 || o.CleanupTimeout < 0 {
		return nil, fmt.Errorf("%w: pglock: negative Config duration (PollMin %v, PollMax %v, CleanupTimeout %v)",
			concurkit.ErrInvalidArgument, o.PollMin, o.PollMax, o.CleanupTimeout)
	}
	if o.PollMin == 0 {
		o.PollMin = DefaultPollMin
	}
	if o.PollMax == 0 {
		o.PollMax = DefaultPollMax
	}
	if o.Sequence == "" {
		o.Sequence = DefaultSequence
	}
	parts := []string{o.Sequence}
	if o.Schema != "" {
		parts = []string{o.Schema, o.Sequence}
	}
	seq, err := ident.Postgres(parts...)
	if err != nil {
		return nil, fmt.Errorf("%w: pglock: Config.Sequence: %w", concurkit.ErrInvalidArgument, err)
	}
	return &Locker{pool: pool, seq: seq, cfg: o}, nil
}

// errNilPool is the error of New for a nil pool and of every method of a
// nil or zero Locker (one not made by New).
var errNilPool = fmt.Errorf("%w: pglock: nil pool (or a Locker not made by New)", concurkit.ErrInvalidArgument)

// SQL. $1 advisory key, $2 idle_session_timeout in ms, $3 sequence name.
const (
	// CASE evaluates its THEN branch (nextval, and setting the idle
	// timeout) only when the try-lock succeeded; length(…)*0 adds nothing.
	// nextval runs only on a session that holds the lock. prev is the
	// session's idle_session_timeout before the statement: the subquery
	// (kept a subquery by OFFSET 0) is scanned before the outer SELECT
	// list runs set_config. Release restores it, so the connection goes
	// back to the pool as it came, without reading pg_settings (a view
	// that materialises every setting: 0.6–1.5 ms of server time).
	sqlTryLock = `SELECT CASE WHEN pg_try_advisory_lock($1)
THEN nextval($3::regclass) + 0 * length(set_config('idle_session_timeout', $2, false)) ELSE 0 END, prev
FROM (SELECT current_setting('idle_session_timeout') AS prev OFFSET 0) AS s`
	sqlExtend = `SELECT set_config('idle_session_timeout', $1, false)`
	// Unlock and restore the session's own idle_session_timeout ($2, read
	// by sqlTryLock) in one statement.
	sqlUnlock = `SELECT pg_advisory_unlock($1), set_config('idle_session_timeout', $2, false)`
	// sqlUnlockOnly frees the lock after a failed try; a WARNING (not an
	// error) if the session did not hold it.
	sqlUnlockOnly = `SELECT pg_advisory_unlock($1)`
	sqlCreateSeq  = `CREATE SEQUENCE IF NOT EXISTS %s AS bigint MINVALUE 1`
	pgUndefined   = "42P01" // undefined_table: the sequence does not exist
)

// Acquire blocks until the lock on key is held or ctx ends (then it
// returns errors.Join(distlock.ErrNotAcquired, ctx.Err())). It polls with
// pg_try_advisory_lock, backing off between attempts (jittered,
// Config.PollMin doubling up to Config.PollMax), and holds no connection
// while it waits, so waiters can never take the pool connections the
// holder needs. It returns distlock.ErrInvalidKey for an empty key, an
// error matching concurkit.ErrInvalidArgument for a negative TTL, one
// above MaxTTL or a nil or zero Locker, distlock.ErrTokenExhausted when
// the token sequence reached its maximum, and driver errors wrapped.
//
// An Acquire that found the lock held reports its wait to the hooks of
// ctx (observe.Hooks.LockWait), and the lease reports its extensions and
// its loss to them (see distlock.Locker). Use BackendPID to learn which
// server session holds a lease's lock.
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, true)
}

// TryAcquire makes one attempt (pg_try_advisory_lock) and returns
// distlock.ErrNotAcquired at once if the lock is held; otherwise as
// Acquire.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, false)
}

// check rejects a nil or zero Locker before any I/O.
func (l *Locker) check() error {
	if l == nil || l.pool == nil {
		return errNilPool
	}
	return nil
}

// checkTTL rejects a TTL the server cannot hold as idle_session_timeout.
func checkTTL(ttl time.Duration) error {
	if ttl > MaxTTL {
		return fmt.Errorf("%w: pglock: TTL %v above MaxTTL %v (PostgreSQL's idle_session_timeout maximum)", concurkit.ErrInvalidArgument, ttl, MaxTTL)
	}
	return nil
}

func (l *Locker) acquire(ctx context.Context, key string, opts *distlock.Options, wait bool) (distlock.Lease, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	o, err := lease.Resolve(pkg, key, opts)
	if err != nil {
		return nil, err
	}
	if err := checkTTL(o.TTL); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(distlock.ErrNotAcquired, err)
	}
	if l.bg.Closed() {
		return nil, lease.ErrClosed(pkg)
	}
	try := func(ctx context.Context) (distlock.Lease, error) {
		for created := false; ; created = true {
			lz, err := l.attempt(ctx, key, o)
			if err != nil && !created && sqlerr.SQLState(err) == pgUndefined {
				if cerr := l.CreateSequence(ctx); cerr != nil {
					return nil, errors.Join(err, cerr)
				}
				continue
			}
			return lz, err
		}
	}
	if !wait {
		return try(ctx)
	}
	// Waiting inside pg_advisory_lock would park one pool connection per
	// waiter: with the pool an application shares (pgxpool's default is
	// max(4, NumCPU) connections) a few waiters take every connection and
	// the holder can no longer get one for its own work, or to release.
	// Polling holds a connection only for one short statement at a time.
	return lease.Poll(ctx, lease.PollPolicy{Min: l.cfg.PollMin, Max: l.cfg.PollMax, Package: pkg, Key: key, Stop: l.bg.Done()}, try)
}

// Close releases the leases of the Locker still held (each unlocks on its
// session and hands its connection back to the pool), ends waiting
// Acquire calls (with distlock.ErrClosed), refuses later ones, and waits
// until every lease's session goroutine has finished — and every try-lock
// whose caller gave up has its answer, a lock it took unlocked — or ctx
// ends. See
// distlock.Closer for what it returns. The pool is not closed. A nil
// Locker's Close returns nil.
func (l *Locker) Close(ctx context.Context) error {
	if l == nil || l.pool == nil {
		return nil
	}
	return l.bg.Close(ctx, pkg)
}

// CreateSequence creates the token sequence if it does not exist. It
// returns an error matching concurkit.ErrInvalidArgument for a nil or zero
// Locker.
func (l *Locker) CreateSequence(ctx context.Context) error {
	if err := l.check(); err != nil {
		return err
	}
	c, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pglock: create sequence: %w", err)
	}
	defer c.Release()
	_, err = c.Exec(ctx, fmt.Sprintf(sqlCreateSeq, l.seq))
	if err != nil && sqlerr.Classify(err) != sqlerr.UniqueViolation { // concurrent creators
		return fmt.Errorf("pglock: create sequence %s: %w", l.seq, err)
	}
	return nil
}

// ms formats d for idle_session_timeout: milliseconds rounded up (a
// positive TTL never becomes 0, which disables the timeout), at least 1,
// at most MaxTTL (callers reject longer TTLs first).
func ms(d time.Duration) string {
	n := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		n++
	}
	return strconv.FormatInt(min(max(n, 1), int64(MaxTTL/time.Millisecond)), 10)
}

// attempt makes one try-lock on a connection of its own and returns a
// lease, distlock.ErrNotAcquired when another session holds the lock, or
// an error.
func (l *Locker) attempt(ctx context.Context, key string, o distlock.Options) (distlock.Lease, error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, errors.Join(distlock.ErrNotAcquired, cerr)
		}
		return nil, fmt.Errorf("pglock: acquire connection: %w", err)
	}
	k := pessimistic.AdvisoryKey(key)
	// The server's idle timer starts when the statement ends, after start:
	// the local validity, measured from start, ends no later than the
	// server's.
	start := time.Now()
	var tok int64
	var prev string
	// The try-lock never waits, so it runs to its answer whatever the
	// caller's context does (bounded by CleanupTimeout) and its outcome is
	// always known. A caller that gives up first gets ErrNotAcquired at
	// once; the answer is handled in the background (Close waits for it),
	// a lock it took unlocked on the spot. Interrupting the statement
	// instead could leave it queued on the server, to take the lock after
	// the holder released, on a session nobody would use.
	tryLock := func(ctx context.Context) error {
		return conn.QueryRow(ctx, sqlTryLock, k, ms(o.TTL), l.seq).Scan(&tok, &prev)
	}
	if ctx.Done() == nil {
		err = tryLock(ctx)
	} else {
		bound := l.cfg.CleanupTimeout
		if bound == 0 {
			bound = distlock.DefaultCleanupTimeout
		}
		qctx, qcancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
		res := make(chan error, 1)
		go func() { res <- tryLock(qctx) }()
		select {
		case err = <-res:
			qcancel()
		case <-ctx.Done():
			l.bg.Go(func() {
				defer qcancel()
				if err := <-res; err != nil || tok != 0 {
					unlockAndDiscard(conn, k)
					return
				}
				conn.Release()
			})
			return nil, errors.Join(distlock.ErrNotAcquired, ctx.Err())
		}
	}
	if err != nil {
		// The try may have taken the lock before the error (session locks
		// survive a failed statement, e.g. nextval past MAXVALUE): unlock it
		// now, so that the key is free at once rather than when the closed
		// backend gets round to exiting, then close the session, whose state
		// is unknown, which frees whatever it still holds.
		unlockAndDiscard(conn, k)
		if cerr := ctx.Err(); cerr != nil {
			return nil, errors.Join(distlock.ErrNotAcquired, cerr)
		}
		if sqlerr.SQLState(err) == sqlerr.PGSequenceLimit {
			return nil, fmt.Errorf("%w: pglock: token sequence %s: %w", distlock.ErrTokenExhausted, l.seq, err)
		}
		return nil, fmt.Errorf("pglock: lock %q: %w", key, err)
	}
	if tok == 0 { // try-lock failed: the session holds nothing
		conn.Release()
		return nil, distlock.ErrNotAcquired
	}
	s := newSession(conn, k, prev)
	lz, err := lease.New(lease.Config{
		Package: pkg, Hooks: observe.FromContext(ctx), CleanupTimeout: l.cfg.CleanupTimeout, Group: &l.bg,
		Key: key, Token: fenced.Token(tok), TTL: o.TTL, Start: start, AutoExtend: o.AutoExtend,
		Backend: lease.Backend{Extend: s.extend, Release: s.release},
	})
	if err != nil { // the Locker was closed meanwhile (key, token and TTL were checked)
		unlockAndDiscard(conn, k)
		return nil, err
	}
	// The pid is read before run starts: from then on run owns conn, and a
	// session that died at once (its idle timeout passed while this
	// process was paused) is handed back to the pool by run, which clears
	// the pool handle (a data race the chaos election workload found).
	pid := conn.Conn().PgConn().PID()
	l.bg.Go(func() { s.run(lz) })
	return &pgLease{l: lz, pid: pid}, nil
}

// unlockAndDiscard releases advisory lock k if the session holds it (a
// bounded best effort on a connection that still works) and discards the
// connection.
func unlockAndDiscard(c *pgxpool.Conn, k int64) {
	if !c.Conn().PgConn().IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = c.Exec(ctx, sqlUnlockOnly, k)
		cancel()
	}
	discard(c)
}

// discard closes a connection whose session state is unknown and hands it
// back to the pool, which destroys closed connections.
func discard(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Conn().Close(ctx)
	c.Release()
}

// pgLease is a lease of this package: the shared lease state machine and
// the server session that holds the lock. It forwards exactly the methods
// of distlock.Lease (no embedding: the state machine's other methods are
// not for callers).
type pgLease struct {
	l   *lease.Lease
	pid uint32
}

var _ distlock.Lease = (*pgLease)(nil)

func (p *pgLease) Key() string                                         { return p.l.Key() }
func (p *pgLease) Token() fenced.Token                                 { return p.l.Token() }
func (p *pgLease) Context() context.Context                            { return p.l.Context() }
func (p *pgLease) Deadline() (time.Time, bool)                         { return p.l.Deadline() }
func (p *pgLease) Valid() bool                                         { return p.l.Valid() }
func (p *pgLease) Extend(ctx context.Context, ttl time.Duration) error { return p.l.Extend(ctx, ttl) }
func (p *pgLease) Release(ctx context.Context) error                   { return p.l.Release(ctx) }

// BackendPID returns the process id of the PostgreSQL session that holds
// lease's lock (pg_stat_activity.pid, pg_locks.pid), for operators and
// tests (pg_terminate_backend(pid) ends the lease on the server). ok is
// false if lease was not acquired by this package (or is nil). The value
// stays the same after the lease ended.
func BackendPID(lease distlock.Lease) (pid uint32, ok bool) {
	p, ok := lease.(*pgLease)
	if !ok || p == nil {
		return 0, false
	}
	return p.pid, true
}

// session owns the lease's connection. One goroutine (run) owns the
// connection while the lease is held: between requests it waits on the
// idle connection, so a FATAL message or a closed socket is seen at once.
// Extend and Release interrupt the wait and hand their query to it.
type session struct {
	conn *pgxpool.Conn
	key  int64
	idle string // the session's idle_session_timeout before the lock

	reqs chan func()
	stop chan struct{}
	dead chan struct{} // closed when run returns

	mu         sync.Mutex
	pending    int
	cancelWait func()
	connGone   bool  // run handed the dead connection back to the pool
	died       error // set by run when the connection died
	stopped    bool
}

func newSession(conn *pgxpool.Conn, key int64, idle string) *session {
	return &session{conn: conn, key: key, idle: idle, reqs: make(chan func()), stop: make(chan struct{}), dead: make(chan struct{})}
}

func (s *session) run(l *lease.Lease) {
	defer close(s.dead)
	pg := s.conn.Conn().PgConn()
	for {
		s.mu.Lock()
		if s.pending > 0 {
			s.mu.Unlock()
			select {
			case fn := <-s.reqs:
				s.mu.Lock()
				s.pending--
				s.mu.Unlock()
				fn()
			case <-s.stop:
				return
			}
			continue
		}
		if s.stopped {
			s.mu.Unlock()
			return
		}
		// Set under mu together with the checks above, so a request or a
		// stop that arrives later always finds a wait to interrupt. The
		// wait is interrupted with a read deadline in the past, not a
		// context: whatever context handler the pool is configured with, a
		// timed-out read leaves the idle connection usable, and no cancel
		// request can reach the server and hit a later query.
		interrupted := false
		s.cancelWait = func() {
			interrupted = true // under mu
			_ = pg.Conn().SetReadDeadline(time.Now())
		}
		s.mu.Unlock()
		err := pg.WaitForNotification(context.Background())
		s.mu.Lock()
		s.cancelWait = nil
		wasInterrupted := interrupted
		s.mu.Unlock()
		_ = pg.Conn().SetReadDeadline(time.Time{})
		if err == nil || (wasInterrupted && !pg.IsClosed()) {
			continue // a request or stop, or a stray notification
		}
		// The server ended the session (pg_terminate_backend,
		// idle_session_timeout, shutdown) or the socket broke: the lock is
		// gone with it. Hand the dead connection back to the pool now
		// (it is destroyed there) so a lease the caller never releases
		// does not keep a pool slot.
		s.mu.Lock()
		s.died = err
		s.connGone = true
		s.mu.Unlock()
		discard(s.conn)
		l.Lost(fmt.Errorf("pglock: session ended: %w", err))
		return
	}
}

// do runs fn on the connection, from the owner goroutine. It returns
// ctx.Err() as soon as ctx ends; a query already handed over then goes on
// to its own end on the owner goroutine (interrupting a query midway would
// break the connection, and with it the lock), and the next request waits
// for it.
func (s *session) do(ctx context.Context, fn func(*pgxpool.Conn) error) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return distlock.ErrLeaseLost
	}
	s.pending++
	if s.cancelWait != nil {
		s.cancelWait()
	}
	s.mu.Unlock()
	done := make(chan error, 1)
	select {
	case s.reqs <- func() { done <- fn(s.conn) }:
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	case <-s.dead:
		s.mu.Lock()
		s.pending--
		err := s.died
		s.mu.Unlock()
		return fmt.Errorf("%w: pglock: session ended: %w", distlock.ErrLeaseLost, err)
	case <-ctx.Done():
		s.mu.Lock()
		s.pending--
		s.mu.Unlock()
		return ctx.Err()
	}
}

// extend renews idle_session_timeout (the query itself also resets the
// server's idle timer). The query runs with a context the caller cannot
// cancel (a query interrupted midway would break the connection, and with
// it the lock), bounded by ttl; the caller stops waiting for it when ctx
// ends (the lease then keeps its current deadline).
func (s *session) extend(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err // not ErrLeaseLost: the lease stays held until its deadline
	}
	return s.do(ctx, func(c *pgxpool.Conn) error {
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
		defer cancel()
		if _, err := c.Exec(qctx, sqlExtend, ms(ttl)); err != nil {
			return fmt.Errorf("%w: pglock: extend: %w", distlock.ErrLeaseLost, err)
		}
		return nil
	})
}

// release unlocks (compare-and-delete comes for free: only this session
// can unlock its lock) and returns the connection to the pool, or closes
// it when its state is unknown.
func (s *session) release(ctx context.Context) error {
	var unlocked bool
	err := s.do(ctx, func(c *pgxpool.Conn) error {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var ignored string
		return c.QueryRow(qctx, sqlUnlock, s.key, s.idle).Scan(&unlocked, &ignored)
	})
	s.mu.Lock()
	s.stopped = true
	if s.cancelWait != nil {
		s.cancelWait()
	}
	s.mu.Unlock()
	close(s.stop)
	<-s.dead
	s.mu.Lock()
	gone := s.connGone
	s.mu.Unlock()
	switch {
	case err == nil && unlocked:
		s.conn.Release()
		return nil
	case err == nil:
		discard(s.conn)
		return fmt.Errorf("%w: pglock: the session did not hold the lock", distlock.ErrLeaseLost)
	default:
		if !gone {
			discard(s.conn)
		}
		if errors.Is(err, distlock.ErrLeaseLost) {
			return err
		}
		return fmt.Errorf("%w: pglock: unlock: %w", distlock.ErrLeaseLost, err)
	}
}
