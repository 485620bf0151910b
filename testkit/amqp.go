package testkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

var amqpServer = &server{
	name:   "RabbitMQ",
	envVar: "CONCURKIT_AMQP_URL",
	def:    "amqp://guest:guest@127.0.0.1:15680/",
	addrs:  hostPorts,
}

// AMQPURL returns the URL of the shared RabbitMQ server.
func AMQPURL(t testing.TB) string {
	t.Helper()
	return amqpServer.get(t)
}

// AMQP returns a connection to the shared RabbitMQ server and a fresh
// prefix "ck_<random>" for the test's queue and exchange names; declare
// queues with AMQPQueue so that they are deleted at cleanup. The
// connection is closed at cleanup.
func AMQP(t testing.TB) (*amqp.Connection, string) {
	t.Helper()
	return AMQPConn(t, AMQPURL(t)), Name("ck_")
}

// AMQPConn dials url (the shared server's, or "amqp://guest:guest@"+Addr+"/"
// of a StartRabbitMQ Proc) and closes the connection at cleanup.
func AMQPConn(t testing.TB, url string) *amqp.Connection {
	t.Helper()
	c, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatalf("testenv: amqp dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// AMQPQueue declares a durable queue named name on conn and deletes it at
// cleanup (on a connection of its own to url, as conn may be closed by
// then).
func AMQPQueue(t testing.TB, conn *amqp.Connection, url, name string) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("testenv: amqp channel: %v", err)
	}
	defer func() { _ = ch.Close() }()
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		t.Fatalf("testenv: declare queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		c, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
		if err != nil {
			t.Logf("testenv: delete queue %s: %v", name, err)
			return
		}
		defer func() { _ = c.Close() }()
		ch, err := c.Channel()
		if err == nil {
			_, err = ch.QueueDelete(name, false, false, false)
		}
		if err != nil {
			t.Logf("testenv: delete queue %s: %v", name, err)
		}
	})
}

// StartRabbitMQ starts a throwaway RabbitMQ node on free loopback ports
// (15-25 s on the shared 2-core machine; a restart after Kill as long),
// with its own epmd, Erlang cookie, config (max_message_size 16 MiB, no
// plugins), mnesia and logs in t.TempDir(); both are killed at cleanup.
// The returned Proc is the broker (Kill, Start again with its data,
// Freeze); connect to "amqp://guest:guest@"+Addr+"/".
func StartRabbitMQ(t testing.TB) *Proc {
	t.Helper()
	server := "/usr/lib/rabbitmq/bin/rabbitmq-server"
	if v := os.Getenv("CONCURKIT_RABBITMQ_SERVER"); v != "" {
		server = v
	}
	if !isExecutable(server) {
		unavailable(t, fmt.Errorf("%s not found (set CONCURKIT_RABBITMQ_SERVER or install rabbitmq-server)", server))
	}
	epmdBin := binary(t, "CONCURKIT_EPMD", "epmd")
	dir := t.TempDir()
	ports := freePorts(t, 3) // AMQP, distribution, epmd
	write := func(name, data string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("rabbitmq.conf", fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nmax_message_size = 16777216\n", ports[0]), 0o644)
	write("enabled_plugins", "[].\n", 0o644)
	write("rabbitmq-env.conf", "", 0o644)
	cookie := make([]byte, 20)
	_, _ = rand.Read(cookie)
	write(".erlang.cookie", hex.EncodeToString(cookie), 0o400)
	epmd := &Proc{
		Addr: addr(ports[2]), Name: "rabbitmq-epmd",
		argv: []string{epmdBin, "-port", strconv.Itoa(ports[2]), "-address", "127.0.0.1"},
		dir:  dir, log: filepath.Join(dir, "epmd.log"), ready: tcpReady,
	}
	rabbit := &Proc{
		Addr: addr(ports[0]), Name: "rabbitmq",
		argv: []string{server, "-noinput"},
		env: []string{
			"HOME=" + dir,
			"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(dir, "rabbitmq-env.conf"),
			"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq.conf"),
			"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(dir, "advanced.config"),
			"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
			"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
			"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
			"RABBITMQ_NODENAME=ck@localhost",
			"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
			"RABBITMQ_NODE_PORT=" + strconv.Itoa(ports[0]),
			"RABBITMQ_DIST_PORT=" + strconv.Itoa(ports[1]),
			"ERL_EPMD_PORT=" + strconv.Itoa(ports[2]),
			"ERL_EPMD_ADDRESS=127.0.0.1",
			// rabbitmq-server then execs the VM: the Proc is the broker,
			// not a wrapper shell whose death would orphan it.
			"RABBITMQ_ALLOW_INPUT=1",
			"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
		},
		dir: dir, log: filepath.Join(dir, "rabbitmq.log"), ready: amqpReady,
	}
	startAll(t, []*Proc{epmd})
	startAll(t, []*Proc{rabbit})
	return rabbit
}

func tcpReady(ctx context.Context, address string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", address)
	if err == nil {
		_ = c.Close()
	}
	return err
}

// amqpReady: the broker answers the AMQP 0-9-1 header with Connection.Start
// (method frame on channel 0, class 10, method 10). RabbitMQ opens its AMQP
// listener last in its boot.
func amqpReady(ctx context.Context, address string) error {
	out, err := tcpExchange(ctx, address, "AMQP\x00\x00\x09\x01", func(b []byte) bool { return len(b) >= 11 })
	if err != nil {
		return err
	}
	if len(out) < 11 || out[0] != 1 || out[1] != 0 || out[2] != 0 || !bytes.Equal(out[7:11], []byte{0, 10, 0, 10}) {
		return fmt.Errorf("AMQP header answered %x", out)
	}
	return nil
}
