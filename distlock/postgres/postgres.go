package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/internal/lease"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/pessimistic"
)

// DefaultSequence is the token sequence used when Options.Sequence is empty.
const DefaultSequence = "concurkit_lock_token_seq"

// ErrNilPool is returned by New for a nil pool.
var ErrNilPool = errors.New("postgres: nil pool")

// Pool is the part of *pgxpool.Pool the locker uses.
type Pool interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

var _ Pool = (*pgxpool.Pool)(nil)

// Options configure a Locker. The zero value means the defaults.
type Options struct {
	// Schema optionally qualifies Sequence.
	Schema string
	// Sequence is the token sequence; empty means DefaultSequence. It is
	// created on first use if missing (CREATE SEQUENCE IF NOT EXISTS), or
	// by the migrations.
	Sequence string
}

// Locker hands out advisory-lock leases. It is safe for concurrent use;
// each lease holds one pool connection until it is released or lost.
type Locker struct {
	pool Pool
	seq  string // quoted
}

var _ distlock.Locker = (*Locker)(nil)

// New returns a Locker on pool. opts may be nil. It does no I/O. It
// returns ErrNilPool for a nil pool and an error wrapping
// distlock.ErrInvalidOptions for an invalid sequence name.
func New(pool Pool, opts *Options) (*Locker, error) {
	if pool == nil {
		return nil, ErrNilPool
	}
	var o Options
	if opts != nil {
		o = *opts
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
		return nil, fmt.Errorf("%w: sequence: %w", distlock.ErrInvalidOptions, err)
	}
	return &Locker{pool: pool, seq: seq}, nil
}

// SQL. $1 advisory key, $2 idle_session_timeout in ms, $3 sequence name.
const (
	// The MATERIALIZED CTE runs the lock before the outer query draws the
	// token, so nextval happens only on a session that holds the lock.
	sqlLock = `WITH l AS MATERIALIZED (SELECT set_config('idle_session_timeout', $2, false), pg_advisory_lock($1))
SELECT nextval($3::regclass) FROM l`
	// CASE evaluates its THEN branch (nextval, and setting the idle
	// timeout) only when the try-lock succeeded; length(…)*0 adds nothing.
	sqlTryLock = `SELECT CASE WHEN pg_try_advisory_lock($1)
THEN nextval($3::regclass) + 0 * length(set_config('idle_session_timeout', $2, false)) ELSE 0 END`
	sqlExtend = `SELECT set_config('idle_session_timeout', $1, false)`
	// Unlock and restore the session default before the connection goes
	// back to the pool.
	sqlUnlock = `SELECT pg_advisory_unlock($1),
set_config('idle_session_timeout', (SELECT reset_val FROM pg_settings WHERE name = 'idle_session_timeout'), false)`
	sqlCreateSeq = `CREATE SEQUENCE IF NOT EXISTS %s AS bigint MINVALUE 1`
	pgUndefined  = "42P01" // undefined_table: the sequence does not exist
)

// Acquire blocks until the lock on key is held or ctx ends (then it
// returns errors.Join(distlock.ErrNotAcquired, ctx.Err())). A cancelled
// wait is cancelled on the server too. It returns distlock.ErrInvalidKey
// for an empty key, distlock.ErrInvalidOptions for a negative TTL, and
// driver errors wrapped.
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, true)
}

// TryAcquire makes one attempt (pg_try_advisory_lock) and returns
// distlock.ErrNotAcquired at once if the lock is held; otherwise as
// Acquire.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, false)
}

func (l *Locker) acquire(ctx context.Context, key string, opts *distlock.Options, wait bool) (distlock.Lease, error) {
	o, err := lease.Resolve(key, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(distlock.ErrNotAcquired, err)
	}
	for created := false; ; created = true {
		lz, err := l.attempt(ctx, key, o, wait)
		if err != nil && !created && sqlerr.SQLState(err) == pgUndefined {
			if cerr := l.CreateSequence(ctx); cerr != nil {
				return nil, errors.Join(err, cerr)
			}
			continue
		}
		return lz, err
	}
}

// CreateSequence creates the token sequence if it does not exist.
func (l *Locker) CreateSequence(ctx context.Context) error {
	c, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: create sequence: %w", err)
	}
	defer c.Release()
	_, err = c.Exec(ctx, fmt.Sprintf(sqlCreateSeq, l.seq))
	if err != nil && sqlerr.Classify(err) != sqlerr.UniqueViolation { // concurrent creators
		return fmt.Errorf("postgres: create sequence %s: %w", l.seq, err)
	}
	return nil
}

func ms(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }

func (l *Locker) attempt(ctx context.Context, key string, o distlock.Options, wait bool) (distlock.Lease, error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, errors.Join(distlock.ErrNotAcquired, cerr)
		}
		return nil, fmt.Errorf("postgres: acquire connection: %w", err)
	}
	k := pessimistic.AdvisoryKey(key)
	pg := conn.Conn().PgConn()

	// The query runs with a context the caller cannot cancel; cancelling
	// ctx sends a cancel request instead, so the server stops waiting for
	// the lock rather than leaving an orphaned waiter that would grab the
	// lock later. A last-resort deadline closes the connection if the
	// server does not answer the cancel.
	qctx, qcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer qcancel()
	var fallback *time.Timer
	afterDone := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(afterDone)
		_ = pg.CancelRequest(context.WithoutCancel(ctx))
		fallback = time.AfterFunc(5*time.Second, qcancel)
	})
	start := time.Now()
	var tok int64
	if wait {
		err = conn.QueryRow(qctx, sqlLock, k, ms(o.TTL), l.seq).Scan(&tok)
	} else {
		err = conn.QueryRow(qctx, sqlTryLock, k, ms(o.TTL), l.seq).Scan(&tok)
	}
	cancelled := !stop()
	if cancelled {
		<-afterDone // the AfterFunc ran or is running; it sets fallback
	}
	if fallback != nil {
		fallback.Stop()
	}
	if err != nil || cancelled {
		// The session may hold the lock (granted just before a cancel):
		// closing it ends the session and frees every lock it holds.
		discard(conn)
		if cerr := ctx.Err(); cerr != nil {
			return nil, errors.Join(distlock.ErrNotAcquired, cerr)
		}
		return nil, fmt.Errorf("postgres: lock %q: %w", key, err)
	}
	if wait && err == nil {
		// The server's idle timer started when the lock was granted, at an
		// unknown time after start: renew it now so the validity has a
		// start that is known to be no later than the server's.
		start = time.Now()
		if _, err = conn.Exec(qctx, sqlExtend, ms(o.TTL)); err != nil {
			discard(conn)
			return nil, fmt.Errorf("postgres: lock %q: %w", key, err)
		}
	}
	if tok == 0 { // try-lock failed: the session holds nothing
		conn.Release()
		return nil, distlock.ErrNotAcquired
	}
	s := newSession(conn, k)
	lz, err := lease.New(lease.Config{
		Key: key, Token: fenced.Token(tok), TTL: o.TTL, Start: start, AutoExtend: o.AutoExtend,
		Backend: lease.Backend{Extend: s.extend, Release: s.release},
	})
	if err != nil { // unreachable: key, token and TTL were checked
		discard(conn)
		return nil, err
	}
	s.start(lz)
	return &Lease{Lease: lz, pid: pg.PID()}, nil
}

// discard closes a connection whose session state is unknown and hands it
// back to the pool, which destroys closed connections.
func discard(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Conn().Close(ctx)
	c.Release()
}

// Lease is a PostgreSQL advisory-lock lease. It implements distlock.Lease.
type Lease struct {
	*lease.Lease
	pid uint32
}

// BackendPID returns the process id of the server session that holds the
// lock (pg_stat_activity.pid, pg_locks.pid).
func (l *Lease) BackendPID() uint32 { return l.pid }

// session owns the lease's connection. One goroutine (run) owns the
// connection while the lease is held: between requests it waits on the
// idle connection, so a FATAL message or a closed socket is seen at once.
// Extend and Release interrupt the wait and hand their query to it.
type session struct {
	conn *pgxpool.Conn
	key  int64

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

func newSession(conn *pgxpool.Conn, key int64) *session {
	return &session{conn: conn, key: key, reqs: make(chan func()), stop: make(chan struct{}), dead: make(chan struct{})}
}

func (s *session) start(l *lease.Lease) { go s.run(l) }

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
		l.Lost(fmt.Errorf("postgres: session ended: %w", err))
		return
	}
}

// do runs fn on the connection, from the owner goroutine.
func (s *session) do(fn func(*pgxpool.Conn) error) error {
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
		return <-done
	case <-s.dead:
		s.mu.Lock()
		s.pending--
		err := s.died
		s.mu.Unlock()
		return fmt.Errorf("%w: session ended: %w", distlock.ErrLeaseLost, err)
	}
}

// extend renews idle_session_timeout (the query itself also resets the
// server's idle timer). It runs with a context the caller cannot cancel
// (a query interrupted midway would break the connection, and with it
// the lock), bounded by ttl.
func (s *session) extend(ctx context.Context, ttl time.Duration) error {
	return s.do(func(c *pgxpool.Conn) error {
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
		defer cancel()
		if _, err := c.Exec(qctx, sqlExtend, ms(ttl)); err != nil {
			return fmt.Errorf("%w: extend: %w", distlock.ErrLeaseLost, err)
		}
		return nil
	})
}

// release unlocks (compare-and-delete comes for free: only this session
// can unlock its lock) and returns the connection to the pool, or closes
// it when its state is unknown.
func (s *session) release(ctx context.Context) error {
	var unlocked bool
	err := s.do(func(c *pgxpool.Conn) error {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var ignored string
		return c.QueryRow(qctx, sqlUnlock, s.key).Scan(&unlocked, &ignored)
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
		return fmt.Errorf("%w: the session did not hold the lock", distlock.ErrLeaseLost)
	default:
		if !gone {
			discard(s.conn)
		}
		if errors.Is(err, distlock.ErrLeaseLost) {
			return err
		}
		return fmt.Errorf("%w: unlock: %w", distlock.ErrLeaseLost, err)
	}
}
