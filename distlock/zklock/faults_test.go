package zklock_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// faultyNet is a zk.Dialer that can partition its connections from the
// servers and can lose the response of the next lock-node create.
type faultyNet struct {
	mu      sync.Mutex
	blocked bool
	conns   []net.Conn

	dropCreate  atomic.Bool  // close the connection right after the next lock create is sent
	lockCreates atomic.Int32 // lock-node create requests sent

	// beforeWrite, if set, sees every request packet before it is sent.
	beforeWrite atomic.Pointer[func(op int32, pkt []byte)]
}

func (f *faultyNet) Dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.blocked {
		return nil, errors.New("faultyNet: partitioned")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	fc := &faultyConn{Conn: c, f: f}
	f.conns = append(f.conns, fc)
	return fc, nil
}

// partition cuts every connection and refuses new ones: to the server the
// client looks like a paused or unreachable process.
func (f *faultyNet) partition() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked = true
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

func (f *faultyNet) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked = false
}

type faultyConn struct {
	net.Conn
	f *faultyNet
}

const opCreate = 1

func (c *faultyConn) Write(b []byte) (int, error) {
	if hook := c.f.beforeWrite.Load(); hook != nil && len(b) >= 12 {
		(*hook)(int32(binary.BigEndian.Uint32(b[8:12])), b)
	}
	n, err := c.Conn.Write(b)
	// A request packet: length(4) xid(4) opcode(4) path...
	if err == nil && len(b) >= 12 && binary.BigEndian.Uint32(b[8:12]) == opCreate && bytes.Contains(b, []byte("-lock-")) {
		c.f.lockCreates.Add(1)
		if c.f.dropCreate.CompareAndSwap(true, false) {
			c.Conn.Close() // the request is on the wire; its response is lost
		}
	}
	return n, err
}
