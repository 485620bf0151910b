package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/retry"
)

// pkg names the package in errors and observe events.
const pkg = "etcdlock"

// DefaultPrefix is the key prefix of lock keys when Config.Prefix is empty.
const DefaultPrefix = "/concurkit/locks/"

// DefaultRequestTimeout bounds each etcd request when Config.RequestTimeout
// is zero (etcdctl's --command-timeout default).
const DefaultRequestTimeout = 5 * time.Second

// MaxTTL is the longest TTL the Locker accepts: etcd's lease TTL limit
// (9,000,000,000 seconds). A longer distlock.Options.TTL is bad input (an
// error matching concurkit.ErrInvalidArgument): etcd would refuse it, and
// a TTL that does not fit etcd's whole seconds must never be turned into a
// shorter one.
const MaxTTL = 9_000_000_000 * time.Second

// MaxKeyLen is the longest key in bytes. etcd limits a whole request (1.5
// MiB by default, --max-request-bytes); the bound keeps every lock request
// far below it after escaping (at most 3 bytes per key byte).
const MaxKeyLen = 1024

// Config configures a Locker. A nil *Config or a zero field means the
// documented default; a negative duration is bad input (an error matching
// concurkit.ErrInvalidArgument). New copies it.
type Config struct {
	// Prefix is prepended to every lock key: the keys of the contenders
	// for key k are <Prefix><url.PathEscape(k)>/<session lease id in
	// hex>-<n in hex>.
	// Default DefaultPrefix ("/concurkit/locks/").
	Prefix string
	// RequestTimeout bounds every etcd request the Locker sends, on top of
	// the caller's context: an etcd client whose member is frozen (paused,
	// hung disk) accepts a request and never answers it, and clientv3 has
	// no per-request timeout of its own. It also bounds the cleanup of
	// Release and of an abandoned acquisition when the context given has
	// no deadline. Lease renewals are bounded by a third of the lease's
	// TTL as well, so one renewal stuck on a frozen member leaves time to
	// retry on another. Default DefaultRequestTimeout (5 s).
	RequestTimeout time.Duration
	// CleanupTimeout bounds Release's cleanup (the revocation of the etcd
	// lease), which ignores the cancellation of the caller's context;
	// each revocation request is bounded by RequestTimeout as well.
	// Default distlock.DefaultCleanupTimeout (5 s).
	CleanupTimeout time.Duration
}

// Client is the part of *clientv3.Client the Locker uses.
type Client interface {
	clientv3.KV
	clientv3.Lease
	clientv3.Watcher
}

var _ Client = (*clientv3.Client)(nil)

// Locker hands out leases backed by etcd leases. It is safe for concurrent
// use and holds no resources of its own besides short-lived cleanup
// goroutines (each bounded by the request timeout): closing the client is
// the caller's business.
type Locker struct {
	c       Client
	prefix  string
	timeout time.Duration
	cleanup time.Duration

	bg lease.Group // leases, cleanups and watchers (Close)

	mu       sync.Mutex
	cleanups map[string]*cleanup // pending deletions by key prefix
	sessions map[int64]*session  // by requested TTL in seconds
}

// session is one etcd lease shared by the acquisitions of a Locker that
// ask for the same TTL in whole seconds, as concurrency.Session is under
// concurrency.Mutex: granting and revoking an etcd lease per acquisition
// costs two raft writes, as much as the lock itself. Each acquisition puts
// a key of its own (<lease id>-<n>) attached to the session's lease and
// deletes that key, not the lease, when it ends. Nothing renews a session
// in the background: acquisitions renew it when its last renewal is older
// than a tenth of their validity, Extend and waiting contenders renew it,
// and an unused session expires on the server after its TTL. A lease's
// local validity counts from the session's last renewal before it (the
// server keeps the session's keys at least that long). A session that is
// found gone (expired on the server, revoked) or whose key cleanup failed
// (a key of ours might be left on a lease kept alive by other holders) is
// killed: every lease on it is lost and it is never renewed again, so
// whatever is left of it expires with its TTL.
type session struct {
	id      clientv3.LeaseID
	granted time.Duration

	mu      sync.Mutex
	renewed time.Time // local time just before the latest successful grant or renewal was sent
	dead    bool
	leases  map[*lease.Lease]struct{}
	// free holds the key numbers released leases gave back (see slot);
	// next is the first number never used.
	free []uint64
	next uint64
}

// slot returns the number of a new lock key on this session: the lowest
// one a released lease gave back, else a fresh one. etcd keeps the index
// of a deleted key until the next compaction, and the read of a key's
// contenders walks every index under its prefix: a fresh name for every
// acquisition made each acquisition of a busy key slower than the last
// (about 0.14 ms more per 1,000 acquisitions on this machine), where a
// reused name adds a generation to one index. Two leases alive at once
// never share a number.
func (s *session) slot() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) == 0 {
		s.next++
		return s.next
	}
	i := 0
	for j, n := range s.free {
		if n < s.free[i] {
			i = j
		}
	}
	n := s.free[i]
	s.free[i] = s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return n
}

// giveBack returns key number n once its key is known deleted, and
// nothing of its lease can touch the name again.
func (s *session) giveBack(n uint64) {
	s.mu.Lock()
	s.free = append(s.free, n)
	s.mu.Unlock()
}

// lastRenewed returns the session's latest renewal and whether it is
// still alive.
func (s *session) lastRenewed() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewed, !s.dead
}

// renew records a successful renewal sent at at.
func (s *session) renew(at time.Time) {
	s.mu.Lock()
	if at.After(s.renewed) {
		s.renewed = at
	}
	s.mu.Unlock()
}

// kill ends a session: it is never used or renewed again, and every lease
// on it is lost with cause err.
func (l *Locker) kill(s *session, err error) {
	l.mu.Lock()
	for k, v := range l.sessions {
		if v == s {
			delete(l.sessions, k)
		}
	}
	l.mu.Unlock()
	s.mu.Lock()
	s.dead = true
	leases := make([]*lease.Lease, 0, len(s.leases))
	for ls := range s.leases {
		leases = append(leases, ls)
	}
	s.mu.Unlock()
	for _, ls := range leases {
		ls.Lost(err)
	}
}

// errSessionGone is the cause of the leases of a session whose etcd lease
// the server no longer has.
func errSessionGone(id clientv3.LeaseID) error {
	return fmt.Errorf("%w: etcdlock: session lease %x not found", distlock.ErrLeaseLost, int64(id))
}

// session returns a live session for TTL secs, renewed no longer than
// validity/10 ago, granting one if needed, and the time of its latest
// renewal.
func (l *Locker) session(ctx context.Context, secs int64, validity time.Duration) (*session, error) {
	l.mu.Lock()
	s := l.sessions[secs]
	l.mu.Unlock()
	if s != nil {
		renewed, alive := s.lastRenewed()
		if alive && time.Since(renewed) <= validity/10 {
			return s, nil
		}
		if alive {
			at := time.Now()
			rctx, cancel := l.renewal(ctx, validity)
			_, err := l.c.KeepAliveOnce(rctx, s.id)
			cancel()
			switch {
			case err == nil:
				s.renew(at)
				return s, nil
			case !errors.Is(err, rpctypes.ErrLeaseNotFound):
				return nil, fmt.Errorf("etcdlock: renew session lease: %w", err)
			}
			l.kill(s, errSessionGone(s.id))
		}
	}
	start := time.Now()
	rctx, cancel := l.rpc(ctx)
	g, err := l.c.Grant(rctx, secs)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("etcdlock: grant lease: %w", err)
	}
	if g.TTL <= 0 || g.TTL > int64(MaxTTL/time.Second) {
		l.revokeLater(ctx, g.ID)
		return nil, fmt.Errorf("etcdlock: grant lease: server granted TTL %d s for %d s", g.TTL, secs)
	}
	// The server may raise a TTL (to its minimum) but the leases' local
	// validity never exceeds what it granted.
	s = &session{id: g.ID, granted: time.Duration(g.TTL) * time.Second, renewed: start, leases: map[*lease.Lease]struct{}{}}
	l.mu.Lock()
	if old := l.sessions[secs]; old != nil {
		if _, alive := old.lastRenewed(); alive {
			// Another acquisition granted one meanwhile: use that, and
			// let ours expire unused.
			l.mu.Unlock()
			l.revokeLater(ctx, g.ID)
			return old, nil
		}
	}
	l.sessions[secs] = s
	l.mu.Unlock()
	return s, nil
}

// revokeLater revokes an unused etcd lease in the background (bounded by
// the request timeout); if that fails, it expires by its TTL.
func (l *Locker) revokeLater(ctx context.Context, id clientv3.LeaseID) {
	l.bg.Go(func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		defer cancel()
		_, _ = l.c.Revoke(rctx, id)
	})
}

// cleanup counts the background revocations of abandoned acquisitions of
// one key; done is closed when the last one finished.
type cleanup struct {
	n    int
	done chan struct{}
}

var (
	_ distlock.Locker = (*Locker)(nil)
	_ distlock.Closer = (*Locker)(nil)
)

// New returns a Locker using client (a *clientv3.Client). The client's own
// options need no tuning: the Locker bounds every request itself (see
// Config.RequestTimeout). It does no I/O. It returns an error matching
// concurkit.ErrInvalidArgument if client is nil (also a typed nil such as
// a nil *clientv3.Client) or a Config duration is negative.
func New(client Client, cfg *Config) (*Locker, error) {
	if handle.IsNil(client) {
		return nil, fmt.Errorf("%w: etcdlock: nil client", concurkit.ErrInvalidArgument)
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	switch {
	case c.RequestTimeout < 0:
		return nil, fmt.Errorf("%w: etcdlock: Config.RequestTimeout %v < 0", concurkit.ErrInvalidArgument, c.RequestTimeout)
	case c.CleanupTimeout < 0:
		return nil, fmt.Errorf("%w: etcdlock: Config.CleanupTimeout %v < 0", concurkit.ErrInvalidArgument, c.CleanupTimeout)
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	return &Locker{c: client, prefix: c.Prefix, timeout: c.RequestTimeout, cleanup: c.CleanupTimeout, cleanups: make(map[string]*cleanup), sessions: make(map[int64]*session)}, nil
}

// check rejects a nil Locker or one not made by New, before any I/O.
func (l *Locker) check() error {
	if l == nil || l.c == nil {
		return fmt.Errorf("%w: etcdlock: nil or zero Locker (use New)", concurkit.ErrInvalidArgument)
	}
	return nil
}

// Acquire blocks until the lock on key is held or ctx ends (then it returns
// errors.Join(distlock.ErrNotAcquired, ctx.Err())). opts.TTL (default
// distlock.DefaultTTL, at most MaxTTL) becomes the etcd lease TTL rounded
// up to whole seconds. Requests that time out or find no leader (a frozen
// or failing member) are retried, with backoff, until ctx ends. It returns
// distlock.ErrInvalidKey for a key that is empty, not valid UTF-8 or longer
// than MaxKeyLen, an error matching concurkit.ErrInvalidArgument for a
// negative TTL or one above MaxTTL (and for a nil Locker), an error
// matching distlock.ErrLeaseLost if the contender's own lease was lost
// while it waited, and other etcd errors. All of the validation happens
// before any request.
//
// An Acquire that had to wait for a predecessor, or to retry a request,
// reports its wait to the hooks of ctx (observe.Hooks.LockWait, Attempts
// counting its attempts), and the lease reports its extensions and its
// loss to them (see distlock.Locker).
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, false)
}

// TryAcquire is Acquire without waiting: one attempt, each request bounded
// by the request timeout. If another holder has the lock it revokes its own
// lease and returns distlock.ErrNotAcquired; an unanswered request returns
// its error (matching context.DeadlineExceeded).
func (l *Locker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, true)
}

// validKey checks the rules of this backend: valid UTF-8 (what Lease.Key
// returns is the key the caller gave, byte for byte, and every backend
// agrees on what a key is) and at most MaxKeyLen bytes. Every other byte
// is escaped, so distinct keys never share a lock.
func validKey(key string) error {
	switch {
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: etcdlock: key %q is not valid UTF-8", distlock.ErrInvalidKey, key)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: etcdlock: key of %d bytes exceeds MaxKeyLen (%d)", distlock.ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

// ttlSeconds rounds a TTL up to whole seconds (at least 1) without
// overflowing; callers reject TTLs above MaxTTL first.
func ttlSeconds(ttl time.Duration) int64 {
	secs := int64(ttl / time.Second)
	if ttl%time.Second != 0 {
		secs++
	}
	return max(1, secs)
}

// rpc bounds one request: the caller's context and the request timeout.
func (l *Locker) rpc(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.timeout)
}

// renewal bounds one lease renewal: rpc, and a third of the validity, so a
// renewal stuck on a frozen member leaves time to retry on another.
func (l *Locker) renewal(ctx context.Context, validity time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, min(l.timeout, max(validity/3, 300*time.Millisecond)))
}

// transient reports errors after which the same request may succeed on
// another member or a little later: no answer within the request timeout,
// no leader, a leader change, an unreachable member.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable || ee.Code() == codes.DeadlineExceeded
	}
	if s, ok := status.FromError(err); ok {
		return s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded
	}
	return false
}

func (l *Locker) acquire(parent context.Context, key string, opts *distlock.Options, try bool) (_ distlock.Lease, err error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	if l.bg.Closed() {
		return nil, lease.ErrClosed(pkg)
	}
	// Close ends a wait: ctx ends with it.
	ctx, stop := l.bg.Bind(parent)
	defer stop()
	defer func() {
		if err != nil && lease.Closing(ctx) && parent.Err() == nil {
			err = lease.ErrClosed(pkg)
		}
	}()
	o, err := lease.Resolve(pkg, key, opts)
	if err != nil {
		return nil, err
	}
	if err := validKey(key); err != nil {
		return nil, err
	}
	if o.TTL > MaxTTL {
		return nil, fmt.Errorf("%w: etcdlock: TTL %v exceeds MaxTTL (%v)", concurkit.ErrInvalidArgument, o.TTL, MaxTTL)
	}
	pfx := l.prefix + url.PathEscape(key) + "/"
	start := time.Now()
	// waited: the acquisition found a predecessor, or retried a request;
	// then its outcome is reported to the hooks as a lock wait.
	n, waited := 0, false
	defer func() {
		if waited {
			lease.ReportWait(ctx, pkg, key, start, n, err)
		}
	}()
	// An abandoned attempt of ours on this key may still be revoking its
	// lease in the background: do not queue behind our own leftover.
	if err := l.waitCleanups(ctx, pfx, &waited); err != nil {
		return nil, errors.Join(distlock.ErrNotAcquired, err)
	}
	for n = 1; ; n++ {
		ls, err := l.attempt(ctx, key, pfx, o, try, &waited)
		switch {
		case err == nil:
			return ls, nil
		case ctx.Err() != nil:
			return nil, errors.Join(distlock.ErrNotAcquired, ctx.Err())
		case try || !transient(err):
			return nil, err
		}
		waited = true
		t := time.NewTimer(retry.Policy{BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second}.Backoff(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(distlock.ErrNotAcquired, ctx.Err())
		case <-t.C:
		}
	}
}

// attempt is one acquisition: a key of its own on the session for its
// TTL, then the wait (which sets *waited). A session found gone on the
// server is replaced once.
func (l *Locker) attempt(ctx context.Context, key, pfx string, o distlock.Options, try bool, waited *bool) (distlock.Lease, error) {
	for i := 0; ; i++ {
		ls, s, err := l.attemptOn(ctx, key, pfx, o, try, waited)
		if i == 0 && s != nil && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			l.kill(s, errSessionGone(s.id))
			continue
		}
		return ls, err
	}
}

func (l *Locker) attemptOn(ctx context.Context, key, pfx string, o distlock.Options, try bool, waited *bool) (_ distlock.Lease, _ *session, err error) {
	secs := ttlSeconds(o.TTL)
	s, err := l.session(ctx, secs, o.TTL)
	if err != nil {
		return nil, nil, err
	}
	validity := min(o.TTL, s.granted)
	id := s.id
	// Unique per acquisition: two acquisitions on one session never share
	// a key (concurrency.Mutex would treat a second Lock on its session as
	// already held).
	slot := s.slot()
	myKey := pfx + strconv.FormatInt(int64(id), 16) + "-" + strconv.FormatUint(slot, 16)
	defer func() {
		if err != nil { // the put may or may not have been applied: deleting covers both
			l.deleteAbandoned(ctx, pfx, s, myKey)
		}
	}()
	rctx, cancel := l.rpc(ctx)
	resp, err := l.c.Txn(rctx).Then(
		clientv3.OpPut(myKey, "", clientv3.WithLease(id)),
		clientv3.OpGet(pfx, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...),
	).Commit()
	cancel()
	if err != nil {
		return nil, s, fmt.Errorf("etcdlock: put lock key: %w", err)
	}
	myRev := resp.Header.Revision
	if myRev <= 1 { // revision 1 is the empty store: a put makes it at least 2
		return nil, s, fmt.Errorf("etcdlock: put lock key: implausible revision %d", myRev)
	}
	owner := resp.Responses[1].GetResponseRange().Kvs
	if len(owner) == 1 && owner[0].CreateRevision == myRev {
		// No wait: our put is the first key, created at the txn's revision.
		ls, err := l.newLease(observe.FromContext(ctx), key, myKey, slot, s, fenced.Token(myRev), validity, o.AutoExtend)
		return ls, s, err
	}
	if try {
		return nil, s, distlock.ErrNotAcquired
	}
	*waited = true
	token, err := l.waitTurn(ctx, pfx, myKey, myRev, s, validity)
	if err != nil {
		return nil, s, err
	}
	if renewed, _ := s.lastRenewed(); time.Since(renewed) > validity/2 { // e.g. a stalled process: renew before handing out the lease
		at := time.Now()
		rctx, cancel := l.renewal(ctx, validity)
		_, err := l.c.KeepAliveOnce(rctx, id)
		cancel()
		if err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				l.kill(s, errSessionGone(id))
				return nil, nil, lostWhileWaiting(id)
			}
			return nil, s, fmt.Errorf("etcdlock: renew lease: %w", err)
		}
		s.renew(at)
	}
	ls, err := l.newLease(observe.FromContext(ctx), key, myKey, slot, s, token, validity, o.AutoExtend)
	return ls, s, err
}

// deleteAbandoned deletes the lock key of a failed or abandoned attempt
// in the background, bounded by the request timeout and detached from the
// caller's cancellation, and waits for it while ctx lasts: a cancelled
// Acquire returns at once even if etcd does not answer, and the Locker's
// next attempt on the key waits for the deletion instead (waitCleanups).
// If the deletion fails the session is killed, so that the key goes with
// the session's lease after its TTL instead of living on with it.
func (l *Locker) deleteAbandoned(ctx context.Context, pfx string, s *session, key string) {
	l.mu.Lock()
	c := l.cleanups[pfx]
	if c == nil {
		c = &cleanup{done: make(chan struct{})}
		l.cleanups[pfx] = c
	}
	c.n++
	l.mu.Unlock()
	done := make(chan struct{})
	l.bg.Go(func() {
		defer close(done)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		_, err := l.c.Delete(rctx, key)
		cancel()
		if err != nil {
			l.kill(s, fmt.Errorf("%w: etcdlock: cleanup of %s failed: %w", distlock.ErrLeaseLost, key, err))
		}
		l.mu.Lock()
		if c.n--; c.n == 0 {
			close(c.done)
			delete(l.cleanups, pfx)
		}
		l.mu.Unlock()
	})
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// waitCleanups waits until no abandoned attempt of this Locker on the key
// with prefix pfx is still being deleted, or ctx ends; if it has to wait,
// it sets *waited.
func (l *Locker) waitCleanups(ctx context.Context, pfx string, waited *bool) error {
	l.mu.Lock()
	c := l.cleanups[pfx]
	l.mu.Unlock()
	if c == nil {
		return nil
	}
	*waited = true
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitTurn waits until no key under pfx was created before ours (myRev),
// watching one predecessor at a time and renewing lease id meanwhile. Each
// check also re-reads our own key in the same transaction (etcd#11456: a
// wait can end because our key was deleted when our lease expired; only a
// key that still exists with our lease holds the lock) and returns its
// CreateRevision, the token (the header revision is not, after a wait).
//
// The predecessors are re-read after every renewal too: a watch whose
// member is frozen never reports anything, while a read, bounded by the
// request timeout, can reach another member. A read or renewal that fails
// transiently is retried at the next renewal; if renewals keep failing,
// the lease expires and the next successful read reports it lost.
func (l *Locker) waitTurn(ctx context.Context, pfx, myKey string, myRev int64, s *session, validity time.Duration) (fenced.Token, error) {
	id := s.id
	renew := time.NewTicker(max(validity/3, 300*time.Millisecond))
	defer renew.Stop()
	preds := append(clientv3.WithLastCreate(), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(myRev-1))
	for {
		rctx, cancel := l.rpc(ctx)
		resp, err := l.c.Txn(rctx).Then(clientv3.OpGet(pfx, preds...), clientv3.OpGet(myKey)).Commit()
		cancel()
		var pred *mvccpb.KeyValue
		switch {
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case err != nil && !transient(err):
			return 0, fmt.Errorf("etcdlock: read predecessors: %w", err)
		case err == nil:
			mine := resp.Responses[1].GetResponseRange().Kvs
			if len(mine) != 1 || clientv3.LeaseID(mine[0].Lease) != id {
				return 0, fmt.Errorf("%w: etcdlock: lock key %s deleted while waiting", distlock.ErrLeaseLost, myKey)
			}
			before := resp.Responses[0].GetResponseRange().Kvs
			if len(before) == 0 {
				return fenced.Token(mine[0].CreateRevision), nil
			}
			pred = before[0]
		}
		if err := l.waitDelete(ctx, pred, s, validity, renew.C); err != nil {
			return 0, err
		}
	}
}

func lostWhileWaiting(id clientv3.LeaseID) error {
	return fmt.Errorf("%w: etcdlock: session lease %x expired while waiting", distlock.ErrLeaseLost, int64(id))
}

// waitDelete waits until pred is deleted or the next renewal of lease id
// is due (after which the caller reads again); with pred nil (the last
// read failed) it only waits for the renewal. The watch starts at the
// current revision, so that etcd serves it from its synced watcher group (a
// watch from an older revision is caught up by a loop that runs every 100
// ms); once the watch is live, the key is read again to catch a deletion
// that happened before.
func (l *Locker) waitDelete(ctx context.Context, pred *mvccpb.KeyValue, s *session, validity time.Duration, renew <-chan time.Time) error {
	var wch clientv3.WatchChan
	if pred != nil {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wch = l.c.Watch(clientv3.WithRequireLeader(wctx), string(pred.Key), clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-renew:
			if _, alive := s.lastRenewed(); !alive {
				return lostWhileWaiting(s.id)
			}
			at := time.Now()
			rctx, cancel := l.renewal(ctx, validity)
			_, err := l.c.KeepAliveOnce(rctx, s.id)
			cancel()
			switch {
			case err == nil:
				s.renew(at)
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				l.kill(s, errSessionGone(s.id))
				return lostWhileWaiting(s.id)
			case ctx.Err() != nil:
				return ctx.Err()
			case !transient(err):
				return fmt.Errorf("etcdlock: renew lease while waiting: %w", err)
			}
			return nil // read again, possibly through another member
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				return nil // watch ended (no leader, compaction): re-read and watch again
			}
			if wr.Created {
				rctx, cancel := l.rpc(ctx)
				g, err := l.c.Get(rctx, string(pred.Key))
				cancel()
				switch {
				case err != nil && (ctx.Err() != nil || !transient(err)):
					return fmt.Errorf("etcdlock: read predecessor: %w", err)
				case err == nil && (len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != pred.CreateRevision):
					return nil
				}
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return nil
				}
			}
		}
	}
}

// newLease hands out the lease: its local validity (at most what the
// server granted) counts from the session's latest renewal, which the
// server's lease outlives.
func (l *Locker) newLease(hooks *observe.Hooks, key, myKey string, slot uint64, s *session, token fenced.Token, validity time.Duration, autoExtend bool) (distlock.Lease, error) {
	var self atomic.Pointer[lease.Lease] // set once New returns
	renewed, alive := s.lastRenewed()
	if !alive {
		return nil, errSessionGone(s.id)
	}
	id, granted := s.id, s.granted
	ls, err := lease.New(lease.Config{
		Package:        pkg,
		Group:          &l.bg,
		Hooks:          hooks,
		CleanupTimeout: l.cleanup,
		Key:            key,
		Token:          token,
		TTL:            validity, // <= granted: the context ends before the server's lease
		Start:          renewed,
		AutoExtend:     autoExtend,
		Backend: lease.Backend{
			Extend: func(ctx context.Context, ttl time.Duration) error {
				if ttl > granted {
					return fmt.Errorf("%w: etcdlock: Extend ttl %v exceeds the lease's granted TTL %v", concurkit.ErrInvalidArgument, ttl, granted)
				}
				if _, alive := s.lastRenewed(); !alive {
					return fmt.Errorf("%w: etcdlock: session lease %x ended", distlock.ErrLeaseLost, int64(id))
				}
				rctx, cancel := l.renewal(ctx, ttl)
				defer cancel()
				if ls := self.Load(); ls != nil {
					// A renewal answered after the validity ended is of no use.
					if dl, ok := ls.Deadline(); ok {
						var cancelDL context.CancelFunc
						rctx, cancelDL = context.WithDeadline(rctx, dl)
						defer cancelDL()
					}
				}
				at := time.Now()
				if _, err := l.c.KeepAliveOnce(rctx, id); err != nil {
					if errors.Is(err, rpctypes.ErrLeaseNotFound) {
						err := errSessionGone(id)
						l.kill(s, err)
						return err
					}
					return fmt.Errorf("etcdlock: extend: %w", err)
				}
				s.renew(at)
				return nil
			},
			Release: func(ctx context.Context) error {
				if ls := self.Load(); ls != nil {
					s.mu.Lock()
					delete(s.leases, ls)
					s.mu.Unlock()
				}
				// Bounded by the context's deadline and the request timeout
				// (also when the context has no deadline). The delete names
				// our key's generation (its create revision is the token):
				// it never touches a later lease's key of the same name.
				rctx, cancel := l.rpc(ctx)
				defer cancel()
				deleted, err := l.deleteOwn(rctx, myKey, int64(token))
				if err != nil {
					// The key may be left on a lease that others keep alive.
					l.kill(s, fmt.Errorf("%w: etcdlock: delete of %s failed: %w", distlock.ErrLeaseLost, myKey, err))
					return fmt.Errorf("etcdlock: delete lock key %s: %w", myKey, err)
				}
				if !deleted {
					return fmt.Errorf("%w: etcdlock: lock key %s already gone", distlock.ErrLeaseLost, myKey)
				}
				s.giveBack(slot)
				return nil
			},
		},
	})
	if err != nil {
		return nil, err
	}
	self.Store(ls)
	s.mu.Lock()
	dead := s.dead
	if !dead {
		s.leases[ls] = struct{}{}
	}
	s.mu.Unlock()
	if dead {
		ls.Lost(errSessionGone(id))
	}
	l.bg.Go(func() { l.watch(ls, s, myKey, int64(token)) })
	return ls, nil
}

// Close releases the leases of the Locker still held, ends waiting
// Acquire calls (with distlock.ErrClosed), refuses later ones, waits for
// every cleanup and watcher the Locker runs in the background, and then
// revokes the etcd leases of its sessions (each request bounded by
// Config.RequestTimeout), so that nothing of the Locker is left on the
// server; or it returns when ctx ends. See distlock.Closer for what it
// returns. The etcd client is not closed. A nil Locker's Close returns
// nil.
func (l *Locker) Close(ctx context.Context) error {
	if l == nil || l.c == nil {
		return nil
	}
	err := l.bg.Close(ctx, pkg)
	l.mu.Lock()
	sessions := make([]*session, 0, len(l.sessions))
	for _, s := range l.sessions {
		sessions = append(sessions, s)
	}
	l.sessions = make(map[int64]*session)
	l.mu.Unlock()
	var errs []error
	for _, s := range sessions {
		rctx, cancel := l.rpc(ctx)
		_, rerr := l.c.Revoke(rctx, s.id)
		cancel()
		l.kill(s, lease.ErrClosed(pkg))
		if rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			errs = append(errs, fmt.Errorf("etcdlock: close: revoke session lease %x: %w", int64(s.id), rerr))
		}
	}
	return errors.Join(append([]error{err}, errs...)...)
}

// deleteOwn deletes key if it is still the generation created at
// revision createRev, and reports whether it did: a lease's name is
// reused by a later lease of its session once released (session.slot), so
// a late cleanup must not delete the newer key.
func (l *Locker) deleteOwn(ctx context.Context, key string, createRev int64) (bool, error) {
	resp, err := l.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", createRev)).
		Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded && resp.Responses[0].GetResponseDeleteRange().Deleted == 1, nil
}

// watch marks ls lost when its key is deleted (lease expired or revoked
// on the server, or the key deleted by someone else). If the watch breaks
// and its revision has been compacted meanwhile, the key is re-read: still
// there on our lease means still held, and watching resumes from there.
func (l *Locker) watch(ls *lease.Lease, s *session, myKey string, createRev int64) {
	ctx := ls.Context()
	id := s.id
	defer func() {
		s.mu.Lock()
		delete(s.leases, ls)
		s.mu.Unlock()
		if errors.Is(context.Cause(ctx), distlock.ErrReleased) {
			return // Release deletes the key
		}
		// Lost or expired while its session may live on (other holders
		// renew it): the key must not outlive the lease. If the delete
		// fails, the session dies with it.
		rctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		_, err := l.deleteOwn(rctx, myKey, createRev)
		cancel()
		if err != nil {
			l.kill(s, fmt.Errorf("%w: etcdlock: cleanup of %s failed: %w", distlock.ErrLeaseLost, myKey, err))
		}
	}()
	var clientCtx context.Context
	if c, ok := l.c.(interface{ Ctx() context.Context }); ok {
		clientCtx = c.Ctx()
	}
	from := createRev + 1
	for ctx.Err() == nil {
		wch := l.c.Watch(ctx, myKey, clientv3.WithRev(from), clientv3.WithFilterPut())
		for wr := range wch {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					ls.Lost(fmt.Errorf("%w: etcdlock: lock key %s deleted", distlock.ErrLeaseLost, myKey))
					return
				}
			}
			from = wr.Header.Revision + 1
		}
		if clientCtx != nil && clientCtx.Err() != nil {
			ls.Lost(fmt.Errorf("%w: etcdlock: client closed", distlock.ErrLeaseLost))
			return
		}
		if ctx.Err() != nil {
			return
		}
		// The watch ended (compaction, lost leader, stream error): back off
		// briefly, then re-read the key before watching again.
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		rctx, cancel := l.rpc(ctx)
		resp, err := l.c.Get(rctx, myKey)
		cancel()
		switch {
		case err != nil:
			continue // unknown: the validity deadline still bounds the lease
		case len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != id || resp.Kvs[0].CreateRevision != createRev:
			ls.Lost(fmt.Errorf("%w: etcdlock: lock key %s gone", distlock.ErrLeaseLost, myKey))
			return
		}
		from = resp.Header.Revision + 1
	}
}
