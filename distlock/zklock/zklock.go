package zklock

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/observe"
)

// pkg names the package in errors and observe events.
const pkg = "zklock"

// DefaultRoot is the znode under which lock nodes are created when
// Config.Root is empty.
const DefaultRoot = "/concurkit/locks"

// MaxKeyLen is the longest key in bytes. A key becomes one znode name of
// at most three times its length (percent-encoding); every request must
// stay below the server's jute.maxbuffer (1 MB by default), and a request
// above it makes the server drop the connection, ending every lease of the
// session.
const MaxKeyLen = 1024

// MaxTTL is the longest TTL the Locker accepts: a ZooKeeper session
// timeout is an int32 of milliseconds (about 24.8 days). The server clamps
// the session timeout to its own [minSessionTimeout, maxSessionTimeout]
// (by default 2 to 20 ticks, 4 s to 40 s with the default 2 s tickTime).
const MaxTTL = math.MaxInt32 * time.Millisecond

// maxRootLen bounds Config.Root (see MaxKeyLen).
const maxRootLen = 1024

// Config configures a Locker. A nil *Config or a zero field means the
// documented default; an invalid field is bad input (an error matching
// concurkit.ErrInvalidArgument). New copies it.
type Config struct {
	// Root is the absolute znode path under which each key gets a child
	// node holding its lock nodes: /<Root>/<escaped key>/_c_<guid>-lock-N.
	// Default DefaultRoot ("/concurkit/locks"). Missing nodes are created
	// (the per-key node as a container node, which the server removes once
	// it is empty). It must be a valid ZooKeeper path of at most 1024
	// bytes outside /zookeeper (the server's own subtree). (It is etcdlock's
	// Prefix, but a path of znodes, validated as such, rather than a
	// string prefix of keys.)
	Root string
	// ACL of the created nodes. Default zk.WorldACL(zk.PermAll); an empty
	// non-nil slice is bad input.
	ACL []zk.ACL
	// Dialer opens the TCP connections to the servers. Default
	// net.DialTimeout.
	Dialer zk.Dialer
	// Logger receives the ZooKeeper client's log lines. Default: discarded.
	// A typed nil (say a nil *log.Logger) is bad input.
	Logger zk.Logger
	// CleanupTimeout bounds Release's cleanup (the delete of the lease's
	// node), which ignores the cancellation of the caller's context. A
	// delete that cannot reach ZooKeeper is handed to a background reaper
	// at once (see the package doc). Default distlock.DefaultCleanupTimeout
	// (5 s); negative is bad input.
	CleanupTimeout time.Duration
}

// Locker hands out leases backed by ZooKeeper sessions. It is safe for
// concurrent use. It owns one client connection (and session) per session
// timeout in use by a lease or a waiting acquisition; when none is in use
// it keeps the last one for the next acquisition. Close ends them all,
// which releases every lock they hold.
type Locker struct {
	servers []string
	root    string
	acl     []zk.ACL
	dialer  zk.Dialer
	logger  zk.Logger
	cleanup time.Duration

	bg lease.Group // leases handed out (Close releases them)

	mu       sync.Mutex
	closed   bool
	sessions []*session
	watchers sync.WaitGroup // lease watchers, acquisitions, session closes
	// abandoned holds, per key node, the done channels of acquisitions
	// whose caller gave up while they still ran (closed when finished).
	abandoned map[string][]chan struct{}
}

var (
	_ distlock.Locker = (*Locker)(nil)
	_ distlock.Closer = (*Locker)(nil)
)

// New returns a Locker for the ZooKeeper ensemble at servers ("host:port").
//
// Its client is the server list, not a *zk.Conn: a ZooKeeper lock lives as
// long as the session that created it, and a session's timeout is fixed
// when it is opened, so the Locker opens one session per lease TTL in use
// (see the package doc) — with its own dialer, which reads the session
// timeout the server granted and works around a data race of the client
// after a reconnection. A single caller-made connection could serve only
// one TTL and would share its session's fate with the caller's other work.
//
// It does not connect until the first acquisition. It returns an error
// matching concurkit.ErrInvalidArgument if servers is empty or holds an
// empty address, cfg.Root is not a valid absolute path (see Config.Root),
// cfg.ACL is empty but not nil, cfg.Logger is a typed nil or
// cfg.CleanupTimeout is negative.
func New(servers []string, cfg *Config) (*Locker, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if len(servers) == 0 || slices.Contains(servers, "") {
		return nil, fmt.Errorf("%w: zklock: no servers (the client is the list of server addresses)", concurkit.ErrInvalidArgument)
	}
	if c.Root == "" {
		c.Root = DefaultRoot
	}
	if err := validRoot(c.Root); err != nil {
		return nil, err
	}
	switch {
	case c.ACL == nil:
		c.ACL = zk.WorldACL(zk.PermAll)
	case len(c.ACL) == 0:
		return nil, fmt.Errorf("%w: zklock: empty Config.ACL", concurkit.ErrInvalidArgument)
	}
	if c.Dialer == nil {
		c.Dialer = net.DialTimeout
	}
	switch {
	case c.Logger == nil:
		c.Logger = discard{}
	case handle.IsNil(c.Logger):
		return nil, fmt.Errorf("%w: zklock: nil %T Config.Logger", concurkit.ErrInvalidArgument, c.Logger)
	}
	if c.CleanupTimeout < 0 {
		return nil, fmt.Errorf("%w: zklock: Config.CleanupTimeout %v < 0", concurkit.ErrInvalidArgument, c.CleanupTimeout)
	}
	return &Locker{
		servers:   slices.Clone(servers),
		root:      strings.TrimSuffix(c.Root, "/"),
		acl:       slices.Clone(c.ACL),
		dialer:    c.Dialer,
		logger:    c.Logger,
		cleanup:   c.CleanupTimeout,
		abandoned: make(map[string][]chan struct{}),
	}, nil
}

type discard struct{}

func (discard) Printf(string, ...any) {}

// validRoot applies ZooKeeper's path rules (PathUtils.validatePath on the
// server; it counts UTF-16 code units, so characters outside the Basic
// Multilingual Plane are surrogates there, which it refuses).
func validRoot(root string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: zklock: Config.Root %q: %s", concurkit.ErrInvalidArgument, root, why)
	}
	switch {
	case !utf8.ValidString(root):
		return bad("not valid UTF-8")
	case len(root) > maxRootLen:
		return bad(fmt.Sprintf("longer than %d bytes", maxRootLen))
	case root == "/":
		return nil
	case !strings.HasPrefix(root, "/") || strings.HasSuffix(root, "/"):
		return bad("must be an absolute path without trailing slash")
	case root == "/zookeeper" || strings.HasPrefix(root, "/zookeeper/"):
		return bad("inside the server's own /zookeeper subtree")
	}
	for part := range strings.SplitSeq(root[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return bad("empty, . or .. path component")
		}
	}
	for _, r := range root {
		if !validPathRune(r) {
			return bad(fmt.Sprintf("character %U not allowed in a znode path", r))
		}
	}
	return nil
}

func validPathRune(r rune) bool {
	switch {
	case r <= 0x1f, r >= 0x7f && r <= 0x9f, r >= 0xd800 && r <= 0xf8ff, r >= 0xfff0:
		return false
	}
	return true
}

// Close releases the leases of the Locker still held (deleting their
// nodes), ends every session of the Locker — the server deletes whatever
// node is left of them at once — ends waiting Acquire calls and refuses
// later ones (with distlock.ErrClosed), and waits for the client
// goroutines to exit, or until ctx ends. See distlock.Closer for what it
// returns. A nil Locker's Close returns nil.
func (l *Locker) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	err := l.bg.Close(ctx, pkg)
	l.mu.Lock()
	sessions := l.sessions
	l.sessions = nil
	l.closed = true
	l.mu.Unlock()
	for _, s := range sessions {
		s.close()
	}
	done := make(chan struct{})
	go func() {
		l.watchers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		return errors.Join(err, &closeUnfinished{ctx.Err()})
	}
}

// closeUnfinished is the error of a Close whose ctx ended before the
// client goroutines exited.
type closeUnfinished struct{ err error }

func (e *closeUnfinished) Error() string {
	return "zklock: close: client goroutines still running: " + e.err.Error()
}
func (e *closeUnfinished) Unwrap() error        { return e.err }
func (e *closeUnfinished) Is(target error) bool { return target == concurkit.ErrOutcomeUnknown }

// goTracked runs fn in a goroutine that Close waits for; it returns false
// (and does not run fn) once the Locker is closed.
func (l *Locker) goTracked(fn func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.watchers.Add(1)
	go func() {
		defer l.watchers.Done()
		fn()
	}()
	return true
}

// session returns a session for a session timeout of ttl, counting one more
// user of it (release with unref): one requested with ttl, else one the
// server granted ttl, else a new one.
func (l *Locker) session(ttl time.Duration) (*session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, lease.ErrClosed(pkg)
	}
	i := slices.IndexFunc(l.sessions, func(s *session) bool { return s.ttl == ttl })
	if i < 0 {
		i = slices.IndexFunc(l.sessions, func(s *session) bool { return s.negotiated.Load() == int64(ttl) })
	}
	if i >= 0 {
		l.sessions[i].refs++
		return l.sessions[i], nil
	}
	s, err := l.dial(ttl)
	if err != nil {
		return nil, err
	}
	s.refs = 1
	l.closeIdleLocked(nil) // an idle session is only kept while no other is open
	l.sessions = append(l.sessions, s)
	return s, nil
}

// unref ends one use of s. When s becomes idle it is kept for the next
// acquisition and every other idle session is closed; dialling a new
// session closes the idle one too. So a Locker holds one session per
// session timeout in use, or, when none is in use, the last one used.
func (l *Locker) unref(s *session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.refs--; s.refs > 0 || l.closed {
		return
	}
	l.closeIdleLocked(s)
}

// closeIdleLocked closes, in the background, every idle session but keep.
func (l *Locker) closeIdleLocked(keep *session) {
	var idle []*session
	l.sessions = slices.DeleteFunc(l.sessions, func(o *session) bool {
		if o != keep && o.refs == 0 {
			idle = append(idle, o)
			return true
		}
		return false
	})
	for _, o := range idle {
		l.watchers.Add(1)
		go func() {
			defer l.watchers.Done()
			o.close() // ends the session: the server deletes its nodes
		}()
	}
}

// Acquire blocks until the lock on key is held or ctx ends (then it
// returns errors.Join(distlock.ErrNotAcquired, ctx.Err()) at once, even if
// a request to a frozen server is still in flight; the attempt cleans up
// after itself in the background). opts.TTL (default distlock.DefaultTTL,
// at most MaxTTL) is the requested session timeout. It returns
// distlock.ErrInvalidKey for a key that is empty, not valid UTF-8, longer
// than MaxKeyLen, "." or ".." (or "zookeeper" under the root "/"),
// an error matching concurkit.ErrInvalidArgument for a negative TTL or one
// above MaxTTL (and for a nil Locker; all before any I/O), an error
// matching distlock.ErrClosed (and distlock.ErrNotAcquired) after Close,
// and ZooKeeper errors other than connection losses (which it rides
// out).
//
// An Acquire that had to wait for a predecessor's node reports its wait to
// the hooks of ctx (observe.Hooks.LockWait, one attempt: the wait is on
// the server), and the lease reports its extensions and its loss to them
// (see distlock.Locker).
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, false)
}

// TryAcquire is Acquire without waiting: if another holder has the lock it
// removes its own node and returns distlock.ErrNotAcquired. It takes no
// longer than one session timeout (at least a second), e.g. when ZooKeeper
// cannot be reached; then it returns an error matching
// distlock.ErrNotAcquired.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, true)
}

// nodeName maps a key to one znode name: every byte outside the URL path
// alphabet (including '/', '%' and every non-ASCII byte) is
// percent-encoded, so the name contains only characters ZooKeeper stores
// as they are and distinct keys get distinct names.
func (l *Locker) nodeName(key string) (string, error) {
	switch {
	case !utf8.ValidString(key):
		return "", fmt.Errorf("%w: zklock: key %q is not valid UTF-8", distlock.ErrInvalidKey, key)
	case len(key) > MaxKeyLen:
		return "", fmt.Errorf("%w: zklock: key of %d bytes exceeds MaxKeyLen (%d)", distlock.ErrInvalidKey, len(key), MaxKeyLen)
	}
	name := url.PathEscape(key)
	if name == "." || name == ".." || (l.root == "" && name == "zookeeper") { // root "/" is stored as ""
		return "", fmt.Errorf("%w: zklock: key %q", distlock.ErrInvalidKey, key)
	}
	return name, nil
}

const (
	protectedPrefix = "_c_"
	lockSuffix      = "-lock-"
	seqDigits       = 10
)

func newGUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("zklock: guid: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// seqOf returns the sequence number of a lock node name, or -1 for a node
// that is not one of ours.
func seqOf(name string) int64 {
	if !strings.HasPrefix(name, protectedPrefix) || len(name) < seqDigits {
		return -1
	}
	i := strings.LastIndex(name, lockSuffix)
	if i < 0 || len(name)-i-len(lockSuffix) != seqDigits {
		return -1
	}
	n, err := strconv.ParseInt(name[i+len(lockSuffix):], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// contender is one acquisition attempt: at most one lock node at a time.
type contender struct {
	l     *Locker
	s     *session
	dir   string
	hooks *observe.Hooks // of the Acquire call's context, for the lease
	// waited is set once the attempt found the lock held and waited (on a
	// predecessor's node or an abandoned attempt): a LockWait event.
	waited atomic.Bool

	node string // base name of our node; "" when we have none
	sid  int64  // session that created node

	// An uncertain create: the request may have been applied although its
	// response was lost. Only meaningful while the session is unchanged.
	pendingGUID string
	pendingSID  int64

	// pre is the read (stat + watch) of our node sent right after its
	// create, together with the children listing (see prefetch).
	pre *prefetch
}

// prefetch is a GetW of our node sent concurrently with the children
// listing that follows its create. ZooKeeper answers one session's
// requests in order, so the read sees the node, and the two share one
// round trip: an uncontended acquisition waits for create, children and
// (at release) delete, as go-zookeeper's own Lock does, instead of a
// fourth round trip for the token (the node's czxid) and the watch.
type prefetch struct {
	node string
	live context.Context // the connection epoch it was sent in
	done chan struct{}   // closed when the answer is in
	stat *zk.Stat
	ch   <-chan zk.Event
	err  error
}

// startPrefetch sends the GetW of our new node from a goroutine.
func (c *contender) startPrefetch(live context.Context) {
	p := &prefetch{node: c.node, live: live, done: make(chan struct{})}
	path := c.dir + "/" + c.node
	s := c.s
	go func() {
		defer close(p.done)
		p.stat, p.ch, p.err = s.getW(path)
	}()
	c.pre = p
}

// getW returns the stat and a watch of our node: the prefetched ones
// when they were read in the current epoch live and the watch has not
// fired since (a fired watch means the node changed or went: read it
// again), else from a fresh GetW.
func (c *contender) getW(live context.Context) (*zk.Stat, <-chan zk.Event, error) {
	if p := c.pre; p != nil {
		c.pre = nil
		<-p.done // answers come in order: it was answered before the listing
		if p.node == c.node && p.live == live && p.err == nil {
			select {
			case <-p.ch:
			default:
				return p.stat, p.ch, nil
			}
		}
	}
	return c.s.getW(c.dir + "/" + c.node) // no watch is left behind if the node is gone
}

// errNoSession is the cause of a TryAcquire that found no session within
// the session timeout.
var errNoSession = errors.New("zklock: no session")

// check rejects a nil Locker or one not made by New, before any I/O.
func (l *Locker) check() error {
	if l == nil || l.servers == nil {
		return fmt.Errorf("%w: zklock: nil or zero Locker (use New)", concurkit.ErrInvalidArgument)
	}
	return nil
}

func (l *Locker) acquire(ctx context.Context, key string, opts *distlock.Options, try bool) (_ distlock.Lease, err error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	o, err := lease.Resolve(pkg, key, opts)
	if err != nil {
		return nil, err
	}
	if o.TTL > MaxTTL {
		return nil, fmt.Errorf("%w: zklock: TTL %v exceeds MaxTTL (%v)", concurkit.ErrInvalidArgument, o.TTL, MaxTTL)
	}
	ttl := o.TTL.Truncate(time.Millisecond) // the protocol's unit; round up
	if ttl < o.TTL {
		ttl += time.Millisecond
	}
	name, err := l.nodeName(key)
	if err != nil {
		return nil, err
	}
	s, err := l.session(ttl)
	if err != nil {
		return nil, err
	}
	c := &contender{l: l, s: s, dir: l.root + "/" + name, hooks: observe.FromContext(ctx)} // root "/" is stored as ""
	start := time.Now()
	defer func() {
		if c.waited.Load() {
			lease.ReportWait(ctx, pkg, key, start, 1, err)
		}
	}()
	// An abandoned attempt of ours on this key may still be removing its
	// node: do not queue behind our own leftover.
	if err := l.waitAbandoned(ctx, c.dir, &c.waited); err != nil {
		l.unref(s)
		return nil, errors.Join(distlock.ErrNotAcquired, err)
	}
	wctx := ctx
	if try {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, tryBound(s), errNoSession)
		defer cancel()
	}
	// The attempt runs on its own goroutine: the client's requests take no
	// context, and one sent to a frozen server only returns when the
	// client gives the connection up (after two thirds of the session
	// timeout). The caller returns when its context ends; the attempt
	// then cleans up (or releases a lease it got too late) by itself.
	type result struct {
		ls  distlock.Lease
		err error
	}
	res := make(chan result)
	finished := make(chan struct{})
	ok := l.goTracked(func() {
		defer close(finished)
		ls, err := c.run(wctx, key, try)
		if err != nil {
			c.cleanup()
			l.unref(s)
		}
		select {
		case res <- result{ls, err}:
		case <-wctx.Done():
			if ls != nil { // nobody waits for it any more
				rctx, cancel := context.WithTimeout(context.Background(), s.timeout())
				_ = ls.Release(rctx)
				cancel()
			}
		}
	})
	if !ok {
		l.unref(s)
		return nil, lease.ErrClosed(pkg)
	}
	select {
	case r := <-res:
		if r.err != nil && ctx.Err() != nil && !errors.Is(r.err, distlock.ErrNotAcquired) {
			r.err = errors.Join(distlock.ErrNotAcquired, ctx.Err())
		}
		if r.err != nil && errors.Is(context.Cause(wctx), errNoSession) && ctx.Err() == nil {
			r.err = fmt.Errorf("%w: zklock: no session within %v", distlock.ErrNotAcquired, tryBound(s))
		}
		return r.ls, r.err
	case <-wctx.Done():
		l.mu.Lock()
		l.abandoned[c.dir] = append(pending(l.abandoned[c.dir]), finished)
		l.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, errors.Join(distlock.ErrNotAcquired, err)
		}
		return nil, fmt.Errorf("%w: zklock: no session within %v", distlock.ErrNotAcquired, tryBound(s))
	}
}

// waitAbandoned waits until the abandoned acquisitions of this Locker on
// the key node dir have finished (removed their node), or ctx ends; if it
// has to wait, it sets *waited.
func (l *Locker) waitAbandoned(ctx context.Context, dir string, waited *atomic.Bool) error {
	l.mu.Lock()
	chans := pending(l.abandoned[dir])
	if len(chans) == 0 {
		delete(l.abandoned, dir)
	} else {
		l.abandoned[dir] = chans
	}
	l.mu.Unlock()
	if len(chans) > 0 {
		waited.Store(true)
	}
	for _, ch := range chans {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// pending returns the channels of chans that are not closed yet.
func pending(chans []chan struct{}) []chan struct{} {
	return slices.DeleteFunc(chans, func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	})
}

// tryBound is how long TryAcquire may take: one session timeout (after
// which the client gives a silent server up), at least a second (the
// first connection's handshake, before the server granted a timeout).
func tryBound(s *session) time.Duration { return max(s.timeout(), time.Second) }

// pause waits a little before retrying after a connection error, so a
// disconnected client does not spin.
func pause(ctx context.Context, live context.Context) {
	t := time.NewTimer(10 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-live.Done():
	}
}

func (c *contender) run(ctx context.Context, key string, try bool) (distlock.Lease, error) {
	conn := c.s.conn
	for {
		if err := ctx.Err(); err != nil {
			return nil, errors.Join(distlock.ErrNotAcquired, err)
		}
		live, err := c.s.waitLive(ctx)
		if err != nil {
			if errors.Is(err, errClosed) {
				return nil, lease.ErrClosed(pkg)
			}
			return nil, errors.Join(distlock.ErrNotAcquired, err)
		}
		if c.node == "" {
			if err := c.create(); err != nil {
				if isConnErr(err) {
					pause(ctx, live)
					continue
				}
				return nil, err
			}
			c.startPrefetch(live)
		}
		children, _, err := conn.Children(c.dir)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			c.node = "" // the key node (and so our node) is gone
			continue
		case isConnErr(err):
			pause(ctx, live)
			continue
		case err != nil:
			return nil, fmt.Errorf("zklock: children of %s: %w", c.dir, err)
		}
		locks := lockNodes(children)
		idx := slices.Index(locks, c.node)
		if idx < 0 { // our node vanished: the session expired
			c.node = ""
			continue
		}
		if idx == 0 {
			ls, err := c.hold(key, live)
			if isConnErr(err) || errors.Is(err, errRetry) {
				pause(ctx, live)
				continue
			}
			return ls, err
		}
		if try {
			return nil, distlock.ErrNotAcquired
		}
		// Watch only the next-lower node: its deletion is the only event
		// that can make us the lowest. A get (not an exists) sets the
		// watch only if the node is still there, as Curator does: an
		// exists-watch on a node already gone would stay on the server
		// for the session's life, since that name never comes back.
		_, ch, err := c.s.getW(c.dir + "/" + locks[idx-1])
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue
		case isConnErr(err):
			pause(ctx, live)
			continue
		case err != nil:
			return nil, fmt.Errorf("zklock: watch predecessor: %w", err)
		}
		c.waited.Store(true)
		select {
		case <-ch:
		case <-live.Done(): // reconnect, then re-check our node
		case <-ctx.Done():
			return nil, errors.Join(distlock.ErrNotAcquired, ctx.Err())
		}
	}
}

// lockNodes returns the lock node names sorted by sequence number.
func lockNodes(children []string) []string {
	type node struct {
		name string
		seq  int64
	}
	nodes := make([]node, 0, len(children))
	for _, ch := range children {
		if seq := seqOf(ch); seq >= 0 {
			nodes = append(nodes, node{ch, seq})
		}
	}
	slices.SortFunc(nodes, func(a, b node) int { return cmp.Compare(a.seq, b.seq) })
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.name
	}
	return names
}

// create makes our protected ephemeral sequential node, first looking for
// the node of an earlier create whose response was lost (same session).
func (c *contender) create() error {
	conn := c.s.conn
	sid := conn.SessionID()
	if c.pendingGUID != "" && c.pendingSID == sid {
		name, err := c.find(c.pendingGUID)
		if err != nil {
			return err
		}
		c.pendingGUID = ""
		if name != "" {
			c.node, c.sid = name, sid
			return nil
		}
	}
	c.pendingGUID = "" // another session: the earlier node cannot exist
	guid, err := newGUID()
	if err != nil {
		return err
	}
	prefix := c.dir + "/" + protectedPrefix + guid + lockSuffix
	for range 3 {
		path, err := conn.Create(prefix, nil, zk.FlagEphemeral|zk.FlagSequence, c.l.acl)
		switch {
		case err == nil:
			c.node, c.sid = path[strings.LastIndex(path, "/")+1:], sid
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := c.mkdirs(); err != nil {
				return err
			}
			continue
		case errors.Is(err, zk.ErrConnectionClosed):
			c.pendingGUID, c.pendingSID = guid, sid
			return err
		default:
			return fmt.Errorf("zklock: create lock node: %w", err)
		}
	}
	return fmt.Errorf("zklock: create lock node: parent %s keeps disappearing", c.dir)
}

// find returns the base name of the child of c.dir created with guid, or "".
func (c *contender) find(guid string) (string, error) {
	children, _, err := c.s.conn.Children(c.dir)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, ch := range children {
		if strings.HasPrefix(ch, protectedPrefix+guid+"-") {
			return ch, nil
		}
	}
	return "", nil
}

// mkdirs creates the root path (persistent nodes) and the key node (a
// container node, removed by the server when it has no children left).
func (c *contender) mkdirs() error {
	conn := c.s.conn
	path := ""
	parts := strings.Split(strings.TrimPrefix(c.dir, "/"), "/")
	for i, part := range parts {
		path += "/" + part
		var err error
		if i == len(parts)-1 {
			_, err = conn.CreateContainer(path, nil, zk.FlagContainer, c.l.acl)
		} else {
			_, err = conn.Create(path, nil, 0, c.l.acl)
		}
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			if isConnErr(err) {
				return err
			}
			return fmt.Errorf("zklock: create %s: %w", path, err)
		}
	}
	return nil
}

// cleanup removes our node (and any node of an uncertain create) after a
// failed or abandoned acquisition; if ZooKeeper is unreachable, a reaper
// removes it after reconnecting, so the caller is not held up.
func (c *contender) cleanup() {
	if guid, sid := c.pendingGUID, c.pendingSID; guid != "" {
		// The create may have been applied: find the node by its GUID (as
		// Curator's background find-and-delete does when it gives up).
		_ = c.s.background(sid, func() error {
			name, err := c.find(guid)
			if err != nil || name == "" {
				return err
			}
			return c.s.conn.Delete(c.dir+"/"+name, -1)
		}, nil)
		c.pendingGUID = ""
	}
	if c.node != "" {
		_ = c.s.remove(c.dir+"/"+c.node, -1, c.sid, nil)
		c.node = ""
	}
}

var errRetry = errors.New("zklock: retry")

// hold turns our lowest node into a lease: it reads the node's stat (the
// czxid is the token) and sets a watch on it, within the epoch live. The
// lease owns the contender's use of the session from then on.
func (c *contender) hold(key string, live context.Context) (distlock.Lease, error) {
	s, conn := c.s, c.s.conn
	path := c.dir + "/" + c.node
	stat, ch, err := c.getW(live)
	if errors.Is(err, zk.ErrNoNode) {
		c.node = ""
		return nil, errRetry
	}
	if err != nil {
		return nil, err
	}
	if live.Err() != nil { // disconnected since: verify again after reconnecting
		return nil, errRetry
	}
	if stat.Czxid <= 0 {
		return nil, fmt.Errorf("zklock: lock node %s has czxid %d", path, stat.Czxid)
	}
	version, sid := stat.Version, stat.EphemeralOwner
	unref := sync.OnceFunc(func() { c.l.unref(s) })
	ls, err := lease.New(lease.Config{
		Package:        pkg,
		Group:          &c.l.bg,
		Hooks:          c.hooks,
		CleanupTimeout: c.l.cleanup,
		Key:            key,
		Token:          fenced.Token(stat.Czxid),
		TTL:            0, // validity is the session's, not a timer's
		Backend: lease.Backend{
			Extend: func(ctx context.Context, _ time.Duration) error {
				err := s.call(ctx, func() error {
					ok, _, err := conn.Exists(path)
					if err == nil && !ok {
						err = zk.ErrNoNode
					}
					return err
				})
				switch {
				case err == nil:
					return nil
				case errors.Is(err, zk.ErrNoNode):
					return fmt.Errorf("%w: zklock: lock node %s deleted", distlock.ErrLeaseLost, path)
				}
				return fmt.Errorf("zklock: extend: %w", err)
			},
			Release: func(ctx context.Context) error {
				defer unref()
				return c.release(ctx, path, version, sid)
			},
		},
	})
	if err != nil {
		return nil, err
	}
	c.l.mu.Lock()
	if c.l.closed { // Close is ending the session, which deletes our node
		c.l.mu.Unlock()
		ls.Lost(lease.ErrClosed(pkg))
		return nil, lease.ErrClosed(pkg)
	}
	c.node = "" // owned by the lease now
	c.l.watchers.Add(1)
	c.l.mu.Unlock()
	go c.l.watch(ls, live, ch, s, path, version, sid, unref)
	return ls, nil
}

// release deletes a lease's node (exact version: never a successor's),
// bounded by ctx. It does not wait for a reconnection: while the client is
// disconnected the lease is lost already, and the node is deleted in the
// background after reconnecting with the same session, or goes with the
// expired session.
func (c *contender) release(ctx context.Context, path string, version int32, sid int64) error {
	s := c.s
	gone := func(why string) error {
		return fmt.Errorf("%w: zklock: lock node %s: %s", distlock.ErrLeaseLost, path, why)
	}
	switch {
	case s.isClosed():
		return gone("the Locker was closed, ending its session")
	case s.conn.SessionID() != sid:
		return gone("its session expired")
	case !s.connected():
		_ = s.remove(path, version, sid, nil) // the reaper takes over
		return s.unreachable(path)
	}
	err := s.call(ctx, func() error { return s.remove(path, version, sid, nil) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		return gone("already deleted")
	case errors.Is(err, errClosed):
		return gone("the Locker was closed, ending its session")
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return fmt.Errorf("zklock: release: delete of %s unanswered, still pending: %w", path, err)
	case isConnErr(err): // the reaper takes over
		return s.unreachable(path)
	}
	return fmt.Errorf("zklock: release: delete %s: %w", path, err)
}

// watch marks ls lost when its epoch ends or its node is deleted. A lease
// lost to a disconnection also gives its node up (at once, or via the
// reaper after reconnecting): once the holder has been told it may no
// longer hold the lock, keeping the node would only block the waiters,
// even if the holder never calls Release. A lost lease stops using the
// session (unref); a released one does so in its Release.
func (l *Locker) watch(ls *lease.Lease, live context.Context, ch <-chan zk.Event, s *session, path string, version int32, sid int64, unref func()) {
	defer l.watchers.Done()
	for {
		select {
		case <-ls.Context().Done():
			if !errors.Is(context.Cause(ls.Context()), distlock.ErrReleased) {
				unref()
			}
			return
		case <-live.Done():
			ls.Lost(context.Cause(live))
			if !errors.Is(context.Cause(live), errClosed) {
				_ = s.remove(path, version, sid, nil)
			}
			unref()
			return
		case ev := <-ch:
			switch ev.Type {
			case zk.EventNodeDeleted:
				ls.Lost(fmt.Errorf("%w: zklock: lock node %s deleted", distlock.ErrLeaseLost, path))
				unref()
				return
			case zk.EventNotWatching:
				ls.Lost(fmt.Errorf("%w: zklock: watch on %s ended: %w", distlock.ErrLeaseLost, path, ev.Err))
				unref()
				return
			}
			// The node's data changed: nothing to do; ch is spent, so only
			// the epoch and the lease context are left to wait on.
			ch = nil
		}
	}
}
