package testkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var natsServer = &server{
	name:   "NATS",
	envVar: "CONCURKIT_NATS_URL",
	def:    "nats://127.0.0.1:14222",
	addrs:  hostPorts,
}

// NATSURL returns the URL of the shared NATS server (JetStream enabled).
func NATSURL(t testing.TB) string {
	t.Helper()
	return natsServer.get(t)
}

// NATS returns a JetStream handle on the shared NATS server and a fresh
// prefix "ck_<random>" for the test's stream names and subjects (a valid
// stream name and subject token: name streams prefix+"_x", subjects
// prefix+".x"). Streams whose names start with the prefix are deleted and
// the connection closed at cleanup.
func NATS(t testing.TB) (jetstream.JetStream, string) {
	t.Helper()
	nc := NATSConn(t, NATSURL(t))
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		t.Fatalf("testenv: jetstream: %v", err)
	}
	prefix := Name("ck_")
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		names := js.StreamNames(ctx)
		var del []string
		for n := range names.Name() {
			if strings.HasPrefix(n, prefix) {
				del = append(del, n)
			}
		}
		for _, n := range del {
			if err := js.DeleteStream(ctx, n); err != nil {
				t.Logf("testenv: delete stream %s: %v", n, err)
			}
		}
	})
	return js, prefix
}

// NATSConn connects to url (the shared server's, or a StartNATS Proc's
// "nats://"+Addr) with the client's defaults except: reconnect forever
// every 100 ms (fault tests restart servers), and closes the connection at
// cleanup.
func NATSConn(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("testenv: nats connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// StartNATS starts a throwaway nats-server with JetStream (file storage in
// t.TempDir(), so a killed server restarts with its streams), on a free
// loopback port; killed at cleanup. Connect to "nats://"+Addr.
func StartNATS(t testing.TB) *Proc {
	t.Helper()
	bin := binary(t, "CONCURKIT_NATS_SERVER", "nats-server")
	dir := t.TempDir()
	port := freePorts(t, 1)[0]
	p := &Proc{
		Addr: addr(port), Name: "nats",
		argv: []string{bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "js"), "-n", "ck-nats"},
		dir:  dir, log: filepath.Join(dir, "nats.log"), ready: natsReady,
	}
	startAll(t, []*Proc{p})
	return p
}

// natsReady: JetStream answers an account-info request.
func natsReady(ctx context.Context, address string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := fmt.Fprint(c, "CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\nSUB _INBOX.ck 1\r\nPUB $JS.API.INFO _INBOX.ck 0\r\n\r\n"); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(line, "MSG "):
			body, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			if !strings.Contains(body, "account_info_response") || strings.Contains(body, `"error"`) {
				return fmt.Errorf("JetStream answered %q", strings.TrimSpace(body))
			}
			return nil
		case strings.HasPrefix(line, "HMSG "), strings.HasPrefix(line, "-ERR"):
			return errors.New("JetStream not ready: " + strings.TrimSpace(line))
		}
	}
}
