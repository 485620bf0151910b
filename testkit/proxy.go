package testkit

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one server, for fault
// tests that must not touch the shared servers: Freeze stops forwarding
// bytes in both directions while every connection stays open (a frozen
// server or a partition without a reset, as the client sees it),
// FreezeReplies stops only the server's answers (requests reach the
// server and are applied; the client hears nothing: the lost answer of a
// request that succeeded), Thaw resumes, and Cut closes every connection
// (a crash or a reset). Start one with StartProxy; point the client under
// test at Addr.
type Proxy struct {
	// Addr is the proxy's listening address ("127.0.0.1:port").
	Addr string

	target string
	ln     net.Listener

	mu      sync.Mutex
	frozen  chan struct{} // closed on Thaw; nil while thawed
	replies chan struct{} // the same, for FreezeReplies
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// StartProxy starts a Proxy to target ("host:port") and stops it at the end
// of the test (closing every connection).
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testkit: proxy listen: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.Thaw()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(s, c, false) })
		p.wg.Go(func() { p.pipe(c, s, true) })
	}
}

// pipe copies src to dst, waiting while the proxy is frozen (or, for
// the server's replies, while replies are frozen), and closes both when
// either side ends.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait(reply)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or a closed connection: close the other side
			return
		}
	}
}

// wait blocks while the proxy is frozen (or replies are, for a reply).
func (p *Proxy) wait(reply bool) {
	for {
		p.mu.Lock()
		ch := p.frozen
		if ch == nil && reply {
			ch = p.replies
		}
		p.mu.Unlock()
		if ch == nil {
			return
		}
		<-ch
	}
}

// FreezeReplies holds what the server sends (until Thaw) while still
// forwarding what clients send: requests reach the server and are
// applied, their answers do not come back. With Cut afterwards, it is
// the fault "the connection died after the request was sent": the client
// cannot know whether the server applied it (a publish whose ack was
// lost, a COMMIT whose answer was).
func (p *Proxy) FreezeReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.replies == nil {
		p.replies = make(chan struct{})
	}
}

// Freeze stops forwarding: bytes read from either side are held until
// Thaw (connections stay open; new ones are accepted and held too).
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen == nil {
		p.frozen = make(chan struct{})
	}
}

// Thaw resumes forwarding, in order, what Freeze or FreezeReplies held.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen != nil {
		close(p.frozen)
		p.frozen = nil
	}
	if p.replies != nil {
		close(p.replies)
		p.replies = nil
	}
}

// Cut closes every connection through the proxy (both sides); new
// connections are still accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
