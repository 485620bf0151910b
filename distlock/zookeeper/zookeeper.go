package zookeeper

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/lease"
)

// DefaultRoot is the znode under which lock nodes are created when
// Config.Root is empty.
const DefaultRoot = "/concurkit/locks"

// ErrClosed is returned by Acquire and TryAcquire after Close.
var ErrClosed = errors.New("zookeeper: locker closed")

// Config configures a Locker. A nil *Config or a zero field means the
// documented default.
type Config struct {
	// Root is the absolute znode path under which each key gets a child
	// node holding its lock nodes: /<Root>/<escaped key>/_c_<guid>-lock-N.
	// Default DefaultRoot. Missing nodes are created (the per-key node as a
	// container node, which the server removes once it is empty).
	Root string
	// ACL of the created nodes. Default zk.WorldACL(zk.PermAll).
	ACL []zk.ACL
	// Dialer opens the TCP connections to the servers. Default
	// net.DialTimeout.
	Dialer zk.Dialer
	// Logger receives the ZooKeeper client's log lines. Default: discarded.
	Logger zk.Logger
}

// Locker hands out leases backed by ZooKeeper sessions. It is safe for
// concurrent use. It owns one client connection (and session) per distinct
// TTL used; Close ends them, which releases every lock they hold.
type Locker struct {
	servers []string
	root    string
	acl     []zk.ACL
	dialer  zk.Dialer
	logger  zk.Logger

	mu       sync.Mutex
	closed   bool
	sessions map[time.Duration]*session
	watchers sync.WaitGroup
}

var _ distlock.Locker = (*Locker)(nil)

// New returns a Locker for the ZooKeeper ensemble at servers ("host:port").
// It does not connect until the first acquisition. It returns an error
// matching distlock.ErrInvalidOptions if servers is empty or cfg.Root is
// not a valid absolute path.
func New(servers []string, cfg *Config) (*Locker, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if len(servers) == 0 || slices.Contains(servers, "") {
		return nil, fmt.Errorf("%w: zookeeper: no servers", distlock.ErrInvalidOptions)
	}
	if c.Root == "" {
		c.Root = DefaultRoot
	}
	if err := validRoot(c.Root); err != nil {
		return nil, err
	}
	if c.ACL == nil {
		c.ACL = zk.WorldACL(zk.PermAll)
	}
	if c.Dialer == nil {
		c.Dialer = net.DialTimeout
	}
	if c.Logger == nil {
		c.Logger = discard{}
	}
	return &Locker{
		servers:  slices.Clone(servers),
		root:     strings.TrimSuffix(c.Root, "/"),
		acl:      c.ACL,
		dialer:   c.Dialer,
		logger:   c.Logger,
		sessions: make(map[time.Duration]*session),
	}, nil
}

type discard struct{}

func (discard) Printf(string, ...any) {}

func validRoot(root string) error {
	if root == "/" {
		return nil
	}
	if !strings.HasPrefix(root, "/") || strings.HasSuffix(root, "/") {
		return fmt.Errorf("%w: zookeeper: root %q must be an absolute path without trailing slash", distlock.ErrInvalidOptions, root)
	}
	for part := range strings.SplitSeq(root[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("%w: zookeeper: invalid root %q", distlock.ErrInvalidOptions, root)
		}
	}
	return nil
}

// Close ends every session of the Locker: each lease's context is
// cancelled and the server deletes their lock nodes at once. Waiting
// Acquire calls return ErrClosed. Close waits for the client goroutines to
// exit and is idempotent.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	sessions := l.sessions
	l.sessions = nil
	l.mu.Unlock()
	for _, s := range sessions {
		s.close()
	}
	l.watchers.Wait()
	return nil
}

func (l *Locker) session(ttl time.Duration) (*session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if s := l.sessions[ttl]; s != nil {
		return s, nil
	}
	s, err := l.dial(ttl)
	if err != nil {
		return nil, err
	}
	l.sessions[ttl] = s
	return s, nil
}

// Acquire blocks until the lock on key is held or ctx ends (then it
// returns errors.Join(distlock.ErrNotAcquired, ctx.Err())). opts.TTL (default
// distlock.DefaultTTL) is the session timeout. It returns
// distlock.ErrInvalidKey for an empty key or "." / "..",
// distlock.ErrInvalidOptions for a negative TTL, ErrClosed after Close, and
// ZooKeeper errors other than connection losses (which it rides out).
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, false)
}

// TryAcquire is Acquire without waiting: if another holder has the lock it
// removes its own node and returns distlock.ErrNotAcquired.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.acquire(ctx, key, opts, true)
}

// nodeName maps a key to one znode name: every byte outside the URL path
// alphabet (including '/') is percent-encoded.
func nodeName(key string) (string, error) {
	name := url.PathEscape(key)
	if name == "." || name == ".." {
		return "", fmt.Errorf("%w: zookeeper: key %q", distlock.ErrInvalidKey, key)
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
		return "", fmt.Errorf("zookeeper: guid: %w", err)
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
	l   *Locker
	s   *session
	dir string

	node string // base name of our node; "" when we have none
	sid  int64  // session that created node

	// An uncertain create: the request may have been applied although its
	// response was lost. Only meaningful while the session is unchanged.
	pendingGUID string
	pendingSID  int64
}

func (l *Locker) acquire(ctx context.Context, key string, opts *distlock.Options, try bool) (distlock.Lease, error) {
	o, err := lease.Resolve(key, opts)
	if err != nil {
		return nil, err
	}
	name, err := nodeName(key)
	if err != nil {
		return nil, err
	}
	s, err := l.session(o.TTL)
	if err != nil {
		return nil, err
	}
	c := &contender{l: l, s: s, dir: l.root + "/" + name}
	if l.root == "/" {
		c.dir = "/" + name
	}
	ls, err := c.run(ctx, key, try)
	if err != nil {
		c.cleanup()
		if ctx.Err() != nil && !errors.Is(err, distlock.ErrNotAcquired) {
			err = errors.Join(distlock.ErrNotAcquired, ctx.Err())
		}
		return nil, err
	}
	return ls, nil
}

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
				return nil, ErrClosed
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
			return nil, fmt.Errorf("zookeeper: children of %s: %w", c.dir, err)
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
		// that can make us the lowest.
		ok, _, ch, err := conn.ExistsW(c.dir + "/" + locks[idx-1])
		switch {
		case isConnErr(err):
			pause(ctx, live)
			continue
		case err != nil:
			return nil, fmt.Errorf("zookeeper: watch predecessor: %w", err)
		case !ok:
			continue
		}
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
			return fmt.Errorf("zookeeper: create lock node: %w", err)
		}
	}
	return fmt.Errorf("zookeeper: create lock node: parent %s keeps disappearing", c.dir)
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
			return fmt.Errorf("zookeeper: create %s: %w", path, err)
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

var errRetry = errors.New("zookeeper: retry")

// hold turns our lowest node into a lease: it reads the node's stat (the
// czxid is the token) and sets a watch on it, within the epoch live.
func (c *contender) hold(key string, live context.Context) (distlock.Lease, error) {
	conn := c.s.conn
	path := c.dir + "/" + c.node
	ok, stat, ch, err := conn.ExistsW(path)
	if err != nil {
		return nil, err
	}
	if !ok {
		c.node = ""
		return nil, errRetry
	}
	if live.Err() != nil { // disconnected since: verify again after reconnecting
		return nil, errRetry
	}
	version, sid := stat.Version, stat.EphemeralOwner
	ls, err := lease.New(lease.Config{
		Key:   key,
		Token: fenced.Token(stat.Czxid),
		TTL:   0, // validity is the session's, not a timer's
		Backend: lease.Backend{
			Extend: func(context.Context, time.Duration) error {
				ok, _, err := conn.Exists(path)
				switch {
				case err != nil:
					return fmt.Errorf("zookeeper: extend: %w", err)
				case !ok:
					return fmt.Errorf("%w: zookeeper: lock node %s deleted", distlock.ErrLeaseLost, path)
				}
				return nil
			},
			Release: func(context.Context) error {
				// While disconnected, wait up to one session timeout for the
				// reconnection (by then the session has expired if it never
				// came); after that the reaper carries on in the background.
				reaped := make(chan error, 1)
				err := c.s.remove(path, version, sid, reaped)
				if isConnErr(err) {
					t := time.NewTimer(c.s.timeout)
					select {
					case err = <-reaped:
					case <-t.C:
						err = fmt.Errorf("zookeeper: release: node %s will be deleted after reconnecting: %w", path, err)
					}
					t.Stop()
				}
				switch {
				case err == nil:
					return nil
				case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion), errors.Is(err, errClosed):
					return fmt.Errorf("%w: zookeeper: lock node %s: %w", distlock.ErrLeaseLost, path, err)
				}
				return fmt.Errorf("zookeeper: release: %w", err)
			},
		},
	})
	if err != nil {
		return nil, err
	}
	c.l.mu.Lock()
	if c.l.closed { // Close is ending the session, which deletes our node
		c.l.mu.Unlock()
		ls.Lost(ErrClosed)
		return nil, ErrClosed
	}
	c.node = "" // owned by the lease now
	c.l.watchers.Add(1)
	c.l.mu.Unlock()
	go c.l.watch(ls, live, ch, c.s, path, version, sid)
	return ls, nil
}

// watch marks ls lost when its epoch ends or its node is deleted. A lease
// lost to a disconnection also gives its node up (at once, or via the
// reaper after reconnecting): once the holder has been told it may no
// longer hold the lock, keeping the node would only block the waiters,
// even if the holder never calls Release.
func (l *Locker) watch(ls *lease.Lease, live context.Context, ch <-chan zk.Event, s *session, path string, version int32, sid int64) {
	defer l.watchers.Done()
	for {
		select {
		case <-ls.Context().Done():
			return
		case <-live.Done():
			ls.Lost(context.Cause(live))
			if !errors.Is(context.Cause(live), errClosed) {
				_ = s.remove(path, version, sid, nil)
			}
			return
		case ev := <-ch:
			switch ev.Type {
			case zk.EventNodeDeleted:
				ls.Lost(fmt.Errorf("%w: zookeeper: lock node %s deleted", distlock.ErrLeaseLost, path))
				return
			case zk.EventNotWatching:
				ls.Lost(fmt.Errorf("%w: zookeeper: watch on %s ended: %w", distlock.ErrLeaseLost, path, ev.Err))
				return
			}
			// The node's data changed: nothing to do; ch is spent, so only
			// the epoch and the lease context are left to wait on.
			ch = nil
		}
	}
}
