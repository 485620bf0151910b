// Package redisnodetest helps the tests of the Redis lock backends
// (distlock/redislock, distlock/redlock) model a fault that neither a
// killed nor a frozen server shows: a request the server applied whose
// answer never reaches the client, which go-redis then retries.
package redisnodetest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy in front of a Redis server that can lose the
// answer to a chosen script call: it forwards the call, so the server
// applies it, and then discards everything the server sends back on that
// connection. The client sees its read time out (its ReadTimeout) and,
// with go-redis's default options, retries on a fresh connection, which
// the proxy serves normally.
type Proxy struct {
	// Addr is the address clients connect to.
	Addr string

	target string
	ln     net.Listener
	drop   atomic.Int32  // script calls whose answers are still to be lost
	lost   chan struct{} // one value per lost answer, sent after the call was forwarded
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// NewProxy starts a proxy to the Redis server at target on a free
// loopback port. It is closed at the test's cleanup (after the clients
// registered later are closed: cleanups run last-in first-out).
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, lost: make(chan struct{}, 64), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// LoseAnswers makes the proxy lose the answers to the next n script calls
// (EVALSHA or EVAL, on any connection): each is forwarded to the server,
// and the connection it came on answers nothing from then on.
func (p *Proxy) LoseAnswers(n int) { p.drop.Add(int32(n)) }

// Lost returns a channel that receives a value each time a script call
// was forwarded whose answer will be lost.
func (p *Proxy) Lost() <-chan struct{} { return p.lost }

func (p *Proxy) close() {
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil // refuse connections accepted from now on
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			_ = client.Close()
			_ = server.Close()
			return
		}
		var mute atomic.Bool // set once this connection's answers are lost
		done := func() { _ = client.Close(); _ = server.Close() }
		p.wg.Go(func() { p.requests(client, server, &mute); done() })
		p.wg.Go(func() { answers(server, client, &mute); done() })
	}
}

// requests forwards the client's commands one by one (RESP arrays of
// bulk strings, as go-redis writes them).
func (p *Proxy) requests(client, server net.Conn, mute *atomic.Bool) {
	r := bufio.NewReader(client)
	for {
		cmd, name, err := readCommand(r)
		if err != nil {
			return
		}
		if (name == "EVALSHA" || name == "EVAL") && !mute.Load() && p.take() {
			mute.Store(true) // before forwarding: the answer cannot get through
			if _, err := server.Write(cmd); err != nil {
				return
			}
			select {
			case p.lost <- struct{}{}:
			default: // nobody counts that many
			}
			continue
		}
		if _, err := server.Write(cmd); err != nil {
			return
		}
	}
}

// take claims one of the answers still to be lost.
func (p *Proxy) take() bool {
	for {
		n := p.drop.Load()
		if n <= 0 {
			return false
		}
		if p.drop.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// answers copies the server's answers to the client until mute is set.
func answers(server, client net.Conn, mute *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && !mute.Load() {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readCommand reads one command, returning its raw bytes and its name in
// upper case.
func readCommand(r *bufio.Reader) (raw []byte, name string, err error) {
	var b bytes.Buffer
	line, err := readLine(r, &b)
	if err != nil {
		return nil, "", err
	}
	if len(line) == 0 || line[0] != '*' {
		return nil, "", fmt.Errorf("redisnodetest: not a RESP array: %q", line)
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil {
		return nil, "", err
	}
	for i := range n {
		line, err := readLine(r, &b)
		if err != nil {
			return nil, "", err
		}
		if len(line) == 0 || line[0] != '$' {
			return nil, "", fmt.Errorf("redisnodetest: not a bulk string: %q", line)
		}
		size, err := strconv.Atoi(string(line[1:]))
		if err != nil || size < 0 {
			return nil, "", errors.New("redisnodetest: bad bulk length")
		}
		start := b.Len()
		if _, err := io.CopyN(&b, r, int64(size)+2); err != nil {
			return nil, "", err
		}
		if i == 0 {
			name = string(bytes.ToUpper(b.Bytes()[start : start+size]))
		}
	}
	return b.Bytes(), name, nil
}

// readLine reads a CRLF-terminated line into b and returns it without
// the CRLF.
func readLine(r *bufio.Reader, b *bytes.Buffer) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	b.Write(line)
	return bytes.TrimSuffix(line, []byte("\r\n")), nil
}
