package chaos

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/testkit"
)

// pgRefusing is a TCP server in front of a real PostgreSQL that answers the
// first refusals connections with an ErrorResponse of SQLSTATE code — what
// a recovering server says — and forwards every later one.
func pgRefusing(t *testing.T, real string, code string, refusals int32) (url string) {
	t.Helper()
	u, err := neturlParse(real)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	target := u.Host
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if n.Add(1) <= refusals {
				go refuse(c, code)
				continue
			}
			go forward(c, target)
		}
	}()
	u.Host = ln.Addr().String()
	return u.String()
}

func refuse(c net.Conn, code string) {
	defer c.Close()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:]))-4) // the startup message
	var body bytes.Buffer
	for _, f := range []string{"SFATAL", "VFATAL", "C" + code, "Mthe database system is starting up"} {
		body.WriteString(f)
		body.WriteByte(0)
	}
	body.WriteByte(0)
	msg := []byte{'E', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(msg[1:], uint32(4+body.Len()))
	_, _ = c.Write(append(msg, body.Bytes()...))
}

func forward(c net.Conn, addr string) {
	defer c.Close()
	s, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { _, _ = io.Copy(s, c) }()
	_, _ = io.Copy(c, s)
}

var neturlParse = url.Parse

// TestWaitReady: a PostgreSQL that is starting up (57P03) is waited for;
// any other refusal — here a database that does not exist — is returned at
// once.
func TestWaitReady(t *testing.T) {
	real := testkit.PostgresServerURL(t)
	systems := []string{"postgres"}
	recovering := pgRefusing(t, real, "57P03", 5)
	if err := waitReady(t.Context(), systems, Endpoints{Postgres: recovering}); err != nil {
		t.Fatalf("waitReady through 5 refusals of a recovering server: %v", err)
	}
	wrong := pgRefusing(t, real, "3D000", 1000)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := waitReady(ctx, systems, Endpoints{Postgres: wrong})
	if err == nil || errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("waitReady on a refusal that is not a restart: %v after %s, want its error at once", err, time.Since(start))
	}
	if err := waitReady(t.Context(), []string{"redis"}, Endpoints{Postgres: wrong}); err != nil {
		t.Fatalf("a run without PostgreSQL waited for it: %v", err)
	}
}

// TestFaultCutByRunEnd: a terminate whose connection to MariaDB is still
// stalled when the run ends is not a fault "not injected" (which fails a
// run as proving nothing) — CI saw one fail TestChaos that way. A fault
// that fails while the run goes on still is.
func TestFaultCutByRunEnd(t *testing.T) {
	p, e, err := startProxies(Endpoints{MySQL: testkit.MySQLServerDSN(t)}, []string{"mysql"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	// A timeout toxic of 0 holds every byte for ever: the server never answers.
	if err := p.toxic("mysql", `{"name":"stall","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`); err != nil {
		t.Fatal(err)
	}
	n := &nemesis{env: &env{Endpoints: e, Run: "cut"}, databases: []string{"mysql"}}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if got := n.run(ctx, []Fault{{Kind: NemesisTerminate}}, nil); len(got) != 0 {
		t.Fatalf("a terminate cut by the run's end was recorded: %+v", got)
	}
	n.databases = nil // a run with no database: a refusal of the fault's own
	if got := n.run(t.Context(), []Fault{{Kind: NemesisTerminate}}, nil); len(got) != 1 || got[0].Error == "" {
		t.Fatalf("a fault that could not be injected was not recorded as such: %+v", got)
	}
}
