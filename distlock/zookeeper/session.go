package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/concurkit/concurkit/distlock"
)

// Causes of a session epoch's end; both match distlock.ErrLeaseLost.
var (
	errSuspended = fmt.Errorf("%w: zookeeper: connection lost, session may have expired", distlock.ErrLeaseLost)
	errExpired   = fmt.Errorf("%w: zookeeper: session expired", distlock.ErrLeaseLost)
	errClosed    = fmt.Errorf("%w: zookeeper: locker closed", distlock.ErrLeaseLost)
)

// session is one ZooKeeper connection (and its session) with a fixed
// session timeout. Its life is cut into epochs: an epoch starts when the
// client has a session and ends at the first disconnection, session expiry
// or Close. Leases are bound to the epoch in which they were verified.
type session struct {
	conn    *zk.Conn
	events  <-chan zk.Event
	timeout time.Duration

	ctx     context.Context // cancelled by close
	stop    context.CancelFunc
	reapers sync.WaitGroup

	mu     sync.Mutex
	live   context.Context // current epoch; nil between epochs
	cancel context.CancelCauseFunc
	ready  chan struct{} // closed when the next epoch starts
	closed bool
}

func (l *Locker) dial(timeout time.Duration) (*session, error) {
	s := &session{timeout: timeout, ready: make(chan struct{})}
	s.ctx, s.stop = context.WithCancel(context.Background())
	conn, events, err := zk.Connect(l.servers, timeout,
		zk.WithDialer(l.dialer), zk.WithLogger(l.logger), zk.WithLogInfo(false),
		zk.WithEventCallback(s.onEvent))
	if err != nil {
		return nil, fmt.Errorf("zookeeper: connect: %w", err)
	}
	s.conn, s.events = conn, events
	return s, nil
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
		if s.live == nil && !s.closed {
			s.live, s.cancel = context.WithCancelCause(context.Background())
			close(s.ready)
		}
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

func (s *session) endEpochLocked(cause error) {
	if s.live == nil {
		return
	}
	s.cancel(cause)
	s.live, s.cancel = nil, nil
	s.ready = make(chan struct{})
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
// error; reaped reports (if not nil) when the node is gone.
func (s *session) remove(path string, version int32, sid int64, reaped chan<- error) error {
	err := s.conn.Delete(path, version)
	if !isConnErr(err) {
		return err
	}
	s.reapers.Add(1)
	go func() {
		defer s.reapers.Done()
		rerr := s.reap(path, version, sid)
		if reaped != nil {
			reaped <- rerr
		}
	}()
	return err
}

func (s *session) reap(path string, version int32, sid int64) error {
	for {
		live, err := s.waitLive(s.ctx)
		if err != nil {
			return err // closed: the session's end deletes the node
		}
		if s.conn.SessionID() != sid {
			return zk.ErrNoNode // expired: the server deleted it
		}
		err = s.conn.Delete(path, version)
		if !isConnErr(err) {
			return err
		}
		pause(s.ctx, live)
	}
}

// isConnErr reports errors after which the outcome of a request is unknown
// or the request never reached the server: retry after reconnecting.
func isConnErr(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrSessionExpired)
}
