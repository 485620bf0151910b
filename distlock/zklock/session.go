package zklock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/concurkit/concurkit/distlock"
)

// Causes of a session epoch's end; both match distlock.ErrLeaseLost.
var (
	errSuspended = fmt.Errorf("%w: zklock: connection lost, session may have expired", distlock.ErrLeaseLost)
	errExpired   = fmt.Errorf("%w: zklock: session expired", distlock.ErrLeaseLost)
	errClosed    = fmt.Errorf("%w: zklock: locker closed", distlock.ErrLeaseLost)
)

// session is one ZooKeeper connection (and its session) with a fixed
// session timeout. Its life is cut into epochs: an epoch starts when the
// client has a session and ends at the first disconnection, session expiry
// or Close. Leases are bound to the epoch in which they were verified.
type session struct {
	conn   *zk.Conn
	events <-chan zk.Event
	ttl    time.Duration // the requested session timeout
	// negotiated is the session timeout the server granted (nanoseconds),
	// read from its connect response; 0 until it answered.
	negotiated atomic.Int64
	refs       int // contenders and leases using the session; guarded by Locker.mu

	ctx     context.Context // cancelled by close
	stop    context.CancelFunc
	reapers sync.WaitGroup

	mu     sync.Mutex
	live   context.Context // current epoch; nil between epochs
	cancel context.CancelCauseFunc
	ready  chan struct{} // closed when the next epoch starts
	closed bool
	// downSince is when the last epoch ended; zero while live.
	downSince time.Time

	// watches counts the watches this package left with the client
	// (getW): never below the number the client holds, so 0 means the
	// client has none to re-register after a reconnection (settleConn).
	watches atomic.Int64

	// Settling after a reconnection with the same session, see settle.
	lastSID  int64
	pending  bool
	settleBy *time.Timer
}

// settleDelay bounds how long an epoch start waits for the client to
// re-register its watches after reconnecting with the same session.
const settleDelay = 50 * time.Millisecond

// settleWatchesDelay bounds how long a new connection's receive loop waits
// for the set-watches request when the session had watches (see
// settleConn): long, since only a watch that fired as the connection
// dropped can leave the count above the client's and the request unsent.
const settleWatchesDelay = time.Second

// opSetWatches is the ZooKeeper protocol opcode of the request with which
// the client re-registers its watches after reconnecting.
const opSetWatches = 101

func (l *Locker) dial(timeout time.Duration) (*session, error) {
	s := &session{ttl: timeout, ready: make(chan struct{})}
	s.ctx, s.stop = context.WithCancel(context.Background())
	dialer := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := l.dialer(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return newSettleConn(c, s), nil
	}
	s.mu.Lock() // the event callback may run before Connect returns
	defer s.mu.Unlock()
	conn, events, err := zk.Connect(l.servers, timeout,
		zk.WithDialer(dialer), zk.WithLogger(l.logger), zk.WithLogInfo(false),
		zk.WithEventCallback(s.onEvent))
	if err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	s.conn, s.events = conn, events
	return s, nil
}

// settleConn reports the client's set-watches request and the session
// timeout granted by the server to its session, and holds back the
// client's receive loop on each connection until the client has sent its
// set-watches request — at once when the session has no watches of ours
// (session.watches is 0: the client sends none), else until the request
// is written or settleWatchesDelay passed. go-zookeeper v1.0.4 reads Conn.lastZxid in sendSetWatches
// while the receive loop, started just before, writes it for every
// response (go-zookeeper/zk#35); a response that arrived first would be a
// data race. The wait orders the two: the read happens before the request
// is written, which happens before the receive loop reads a response.
type settleConn struct {
	net.Conn
	s *session
	// The start of the connect response, the first on the connection:
	// length(4) protocolVersion(4) timeOut(4) sessionId(8) .... Reads
	// happen on one goroutine at a time (the client's connect, then its
	// receive loop, started after it).
	hdr [20]byte
	got int // bytes of the connect response read so far

	gate     chan struct{} // closed when the receive loop may read
	openGate sync.Once
}

func newSettleConn(c net.Conn, s *session) *settleConn {
	return &settleConn{Conn: c, s: s, gate: make(chan struct{})}
}

func (c *settleConn) open() { c.openGate.Do(func() { close(c.gate) }) }

// connected reports whether the connect response has been read whole.
func (c *settleConn) connected() bool {
	return c.got >= len(c.hdr) && c.got >= 4+int(binary.BigEndian.Uint32(c.hdr[0:4]))
}

func (c *settleConn) Read(b []byte) (int, error) {
	if c.connected() {
		<-c.gate
		return c.Conn.Read(b)
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		if c.got < len(c.hdr) {
			copy(c.hdr[c.got:], b[:n])
		}
		c.got += n
		if c.got >= len(c.hdr) && c.got-n < len(c.hdr) {
			timeout := int32(binary.BigEndian.Uint32(c.hdr[8:12]))
			if sid := binary.BigEndian.Uint64(c.hdr[12:20]); sid != 0 && timeout > 0 {
				c.s.negotiated.Store(int64(time.Duration(timeout) * time.Millisecond))
			}
		}
		if c.connected() {
			// With no watches of ours the client has none to re-register:
			// sendSetWatches returns before reading lastZxid, so the
			// receive loop may read at once. Otherwise it waits for the
			// set-watches request, which a loaded machine may send well
			// after 50 ms (a fixed delay let -race see the race once).
			if c.s.watches.Load() == 0 {
				c.open()
			} else {
				time.AfterFunc(settleWatchesDelay, c.open)
			}
		}
	}
	return n, err
}

// getW is conn.GetW counting the watch it leaves with the client: the
// count rises before the request and falls once the watch has delivered
// its event (or was dropped at close), so it is never below the number of
// watches the client holds. The returned channel forwards that event.
func (s *session) getW(path string) (*zk.Stat, <-chan zk.Event, error) {
	s.watches.Add(1)
	_, stat, ch, err := s.conn.GetW(path)
	if err != nil || ch == nil {
		s.watches.Add(-1)
		return stat, nil, err
	}
	out := make(chan zk.Event, 1)
	go func() {
		ev, ok := <-ch
		s.watches.Add(-1)
		if ok {
			out <- ev
		}
		close(out)
	}()
	return stat, out, nil
}

// timeout returns the session timeout the server granted, or the requested
// one until the server has answered.
func (s *session) timeout() time.Duration {
	if n := s.negotiated.Load(); n > 0 {
		return time.Duration(n)
	}
	return s.ttl
}

func (c *settleConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	// A request packet: length(4) xid(4) opcode(4) ...
	if err == nil && len(b) >= 12 && binary.BigEndian.Uint32(b[8:12]) == opSetWatches {
		c.open()
		c.s.settle()
	}
	return n, err
}

// onEvent runs on the client's event loop; it must not block nor call the
// connection.
func (s *session) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.State {
	case zk.StateHasSession:
		if s.live != nil || s.closed || s.pending {
			return
		}
		sid := int64(0)
		if s.conn != nil {
			sid = s.conn.SessionID()
		}
		if sid == 0 || sid != s.lastSID {
			// A new session has no watches to re-register.
			s.lastSID = sid
			s.startEpochLocked()
			return
		}
		// Same session: the client re-registers its watches right after
		// this event. Requests of ours sent before that request could
		// trip a data race inside go-zookeeper v1.0.4 (Conn.lastZxid is
		// read by sendSetWatches and written by recvLoop without
		// synchronisation; go-zookeeper/zk#35), so the epoch starts once
		// the set-watches request is on the wire, or after settleDelay if
		// there were no watches to re-register.
		s.pending = true
		s.settleBy = time.AfterFunc(settleDelay, s.settle)
	case zk.StateConnected, zk.StateSyncConnected, zk.StateSaslAuthenticated:
		// TCP connected or authenticated: no session event.
	default: // Disconnected, Connecting, Expired, AuthFailed, ...
		cause := errSuspended
		if ev.State == zk.StateExpired {
			cause = errExpired
		}
		s.endEpochLocked(cause)
	}
}

func (s *session) startEpochLocked() {
	s.live, s.cancel = context.WithCancelCause(context.Background())
	s.downSince = time.Time{}
	close(s.ready)
}

// settle starts the epoch deferred by a reconnection with the same session.
func (s *session) settle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pending {
		return
	}
	s.pending = false
	s.settleBy.Stop()
	if s.live == nil && !s.closed {
		s.startEpochLocked()
	}
}

func (s *session) endEpochLocked(cause error) {
	if s.pending {
		s.pending = false
		s.settleBy.Stop()
	}
	if s.live == nil {
		return
	}
	s.cancel(cause)
	s.live, s.cancel = nil, nil
	s.ready = make(chan struct{})
	s.downSince = time.Now()
}

// isClosed reports whether close was called.
func (s *session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// connected reports whether the session is in an epoch (connected, with a
// session).
func (s *session) connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live != nil && s.live.Err() == nil
}

// unreachable describes a lock node the client cannot delete now because
// it is not connected: once the client has had no contact for a whole
// session timeout, the server has expired the session and deleted the
// node; before that, the node goes when the client reconnects with the
// same session (see background), or with the session.
func (s *session) unreachable(path string) error {
	s.mu.Lock()
	down := s.downSince
	s.mu.Unlock()
	t := s.timeout()
	if !down.IsZero() {
		if gone := time.Since(down); gone >= t {
			return fmt.Errorf("%w: zklock: lock node %s: no contact with ZooKeeper for %v, longer than the session timeout %v: the session expired and the server deleted the node",
				distlock.ErrLeaseLost, path, gone.Round(time.Millisecond), t)
		}
	}
	return fmt.Errorf("%w: zklock: lock node %s: not connected; it is deleted on reconnection with the same session, or by the server when the session expires (timeout %v)",
		distlock.ErrLeaseLost, path, t)
}

// goTracked runs fn in a goroutine that close waits for; it returns false
// (and does not run fn) once the session is closed.
func (s *session) goTracked(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.reapers.Add(1)
	go func() {
		defer s.reapers.Done()
		fn()
	}()
	return true
}

// call runs fn (a request of the go-zookeeper client, which takes no
// context) and returns its error, or ctx's error if ctx ends first; fn then
// finishes in the background, bounded by the client's receive timeout (two
// thirds of the session timeout), which closes an unanswered connection.
func (s *session) call(ctx context.Context, fn func() error) error {
	res := make(chan error, 1)
	if !s.goTracked(func() { res <- fn() }) {
		return errClosed
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitLive returns the context of the current epoch, waiting for the
// client to (re)connect with a session.
func (s *session) waitLive(ctx context.Context) (context.Context, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errClosed
		}
		live, ready := s.live, s.ready
		s.mu.Unlock()
		if live != nil && live.Err() == nil {
			return live, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// close ends the session: the server deletes its ephemeral nodes at once.
// It waits for the client's goroutines to exit.
func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	s.endEpochLocked(errClosed)
	close(s.ready) // wake waitLive callers; they see closed
	s.ready = make(chan struct{})
	s.mu.Unlock()
	s.stop()
	s.conn.Close()
	for range s.events { //nolint:revive // drain until the event loop exits
	}
	s.reapers.Wait()
}

// remove deletes one of our nodes. If the outcome is unknown because the
// connection is down, the node is not left behind: while our session lives
// it would block the lock for everybody. A background reaper deletes it
// after reconnecting with the same session (if the session changed, the
// server has deleted it already). remove reports the first attempt's
// error; reaped, if not nil, receives the final outcome.
func (s *session) remove(path string, version int32, sid int64, reaped chan<- error) error {
	return s.background(sid, func() error { return s.conn.Delete(path, version) }, reaped)
}

// background runs fn on session sid: at once if connected, else (and after
// a connection error) in a goroutine that waits for the reconnection. It
// gives up when the session changed (the server deleted our ephemeral
// nodes) or the Locker closes. It returns fn's first error, or errPending
// if fn could not run yet; done, if not nil, receives the final outcome.
func (s *session) background(sid int64, fn func() error, done chan<- error) error {
	err := errPending
	s.mu.Lock()
	connected := s.live != nil && s.live.Err() == nil
	s.mu.Unlock()
	// While disconnected, a request would wait in the client's queue and go
	// out before the client re-registers its watches (see onEvent).
	if connected {
		if err = fn(); !isConnErr(err) {
			if done != nil {
				done <- err
			}
			return err
		}
	}
	s.mu.Lock()
	if s.closed { // the session's end deletes our nodes
		s.mu.Unlock()
		if done != nil {
			done <- errClosed
		}
		return err
	}
	s.reapers.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.reapers.Done()
		rerr := s.retry(sid, fn)
		if done != nil {
			done <- rerr
		}
	}()
	return err
}

// errPending: a background operation waits for the reconnection.
var errPending = fmt.Errorf("zklock: not connected: %w", zk.ErrConnectionClosed)

func (s *session) retry(sid int64, fn func() error) error {
	for {
		live, err := s.waitLive(s.ctx)
		if err != nil {
			return err // closed: the session's end deletes our nodes
		}
		if s.conn.SessionID() != sid {
			return zk.ErrNoNode // expired: the server deleted them
		}
		if err := fn(); !isConnErr(err) {
			return err
		}
		pause(s.ctx, live)
	}
}

// isConnErr reports errors after which the outcome of a request is unknown
// or the request never reached the server: retry after reconnecting.
func isConnErr(err error) bool {
	if err == nil {
		return false
	}
	var opErr *net.OpError // the client passes a failed socket write through as is
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrSessionExpired) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.As(err, &opErr)
}
