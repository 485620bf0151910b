package testkit_test

import (
	"context"
	"log"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/concurkit/concurkit/testkit"
)

// The helpers take the test's testing.TB, so these Examples show them inside
// a test function; they compile with the package's tests but do not run
// (testing.TB cannot be made outside a test).

// A pool on a fresh schema of the test PostgreSQL (search_path set on every
// connection), dropped when the test ends. Unreachable server: the test is
// skipped with the command that starts the servers, or fails under CI=true.
func ExamplePostgres() {
	_ = func(t *testing.T) {
		pool := testkit.Postgres(t)
		if _, err := pool.Exec(t.Context(), "CREATE TABLE accounts (id bigint PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
	}
}

// A *sql.DB on a fresh MariaDB database, dropped when the test ends.
func ExampleMySQL() {
	_ = func(t *testing.T) {
		db := testkit.MySQL(t)
		if _, err := db.ExecContext(t.Context(), "CREATE TABLE orders (id bigint PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
	}
}

// A Redis client and a key prefix of the test's own; keys under the prefix
// are deleted when the test ends.
func ExampleRedis() {
	_ = func(t *testing.T) {
		rdb, prefix := testkit.Redis(t)
		if err := rdb.Set(t.Context(), prefix+"k", "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Fault tests start throwaway servers and freeze one (SIGSTOP): the server
// keeps its sockets open and answers nothing, like a paused VM.
func ExampleStartRedis() {
	_ = func(t *testing.T) {
		procs := testkit.StartRedis(t, 5) // five masters for a Redlock test
		procs[0].Freeze(t)
		// ... assert the lock still works with a majority, within bounds ...
		procs[0].Thaw(t)
		procs[1].Kill(t)
		procs[1].Start(t) // same port, same data dir
	}
}

// A JetStream handle on the test NATS and a prefix for the test's stream
// names and subjects; streams named with the prefix are deleted when the
// test ends.
func ExampleNATS() {
	_ = func(t *testing.T) {
		js, prefix := testkit.NATS(t)
		if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: prefix + "_orders", Subjects: []string{prefix + ".orders.>"}}); err != nil {
			t.Fatal(err)
		}
	}
}

// A connection to the test RabbitMQ and a queue of the test's own,
// deleted when the test ends.
func ExampleAMQP() {
	_ = func(t *testing.T) {
		conn, prefix := testkit.AMQP(t)
		testkit.AMQPQueue(t, conn, testkit.AMQPURL(t), prefix+"_orders")
	}
}

// A broker restart and a lost answer: a throwaway RabbitMQ (or StartNATS)
// killed and started again on its port with its data, and a proxy that
// lets a publish reach the broker and holds the broker's confirm until the
// connection is cut.
func ExampleStartRabbitMQ() {
	_ = func(t *testing.T) {
		broker := testkit.StartRabbitMQ(t)
		proxy := testkit.StartProxy(t, broker.Addr)
		url := "amqp://guest:guest@" + proxy.Addr + "/"
		_ = url // publish through the proxy ...
		proxy.FreezeReplies()
		// ... publish: the broker stores it, the confirm is held ...
		proxy.Cut()
		proxy.Thaw()
		broker.Kill(t)
		broker.Start(t)
	}
}

// A clean restart, where Kill is a crash: the broker writes out what it
// buffered (RabbitMQ keeps a queue declared just before it is stopped),
// then Start brings it back on the same port with its data.
func ExampleProc_Stop() {
	_ = func(t *testing.T) {
		broker := testkit.StartRabbitMQ(t)
		url := "amqp://guest:guest@" + broker.Addr + "/"
		testkit.AMQPQueue(t, testkit.AMQPConn(t, url), url, "orders")
		broker.Stop(t)
		broker.Start(t)
		// ... "orders" is there; now a crash: broker.Kill(t) ...
	}
}

// Signal and Restart are Freeze, Kill and Start for code that has no test
// to fail: a fault injector's own goroutine (package chaos takes a
// *testkit.Proc as a chaos.Server).
func ExampleProc_Restart() {
	_ = func(t *testing.T) {
		redis := testkit.StartRedis(t, 1)[0]
		go func() {
			_ = redis.Signal(syscall.SIGKILL)
			if err := redis.Restart(context.Background()); err != nil {
				log.Print(err) // not t.Fatal: this is not the test's goroutine
			}
		}()
	}
}

// One DSN per Galera node for a fresh database: a test writes through all
// three at once (`scripts/services.sh up --profile replicated`).
func ExampleGaleraDSNs() {
	_ = func(t *testing.T) {
		for _, dsn := range testkit.GaleraDSNs(t) {
			db := testkit.MySQLFor(t, dsn)
			_ = db // one client per node
		}
	}
}

// A primary and its synchronous and asynchronous standbys, in one fresh
// schema: promote a standby to see what a failover keeps.
func ExamplePostgresReplicated() {
	_ = func(t *testing.T) {
		r := testkit.PostgresReplicated(t)
		primary := testkit.PostgresPoolFor(t, r.Primary)
		if _, err := primary.Exec(t.Context(), "CREATE TABLE payments (id bigint PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
	}
}

// One *sql.DB over the whole Galera cluster: each new connection goes to
// the next node, so concurrent clients write on all three at once.
func ExampleGalera() {
	_ = func(t *testing.T) {
		db := testkit.Galera(t)
		if _, err := db.ExecContext(t.Context(), "CREATE TABLE stock (id int PRIMARY KEY, n int)"); err != nil {
			t.Fatal(err)
		}
	}
}

// GaleraFor spreads one pool over chosen nodes, e.g. two of the three.
func ExampleGaleraFor() {
	_ = func(t *testing.T) {
		dsns := testkit.GaleraDSNs(t)
		db := testkit.GaleraFor(t, dsns[:2])
		_ = db
	}
}

// A throwaway primary and synchronous standby: kill the primary, promote
// the standby, and bring the old primary back as the new one's standby.
func ExampleStartPostgresReplication() {
	_ = func(t *testing.T) {
		nodes := testkit.StartPostgresReplication(t, true)
		nodes[0].Kill(t)
		standby := testkit.PostgresConn(t, nodes[1].URL())
		if _, err := standby.Exec(t.Context(), "SELECT pg_promote(true, 60)"); err != nil {
			t.Fatal(err)
		}
		if err := nodes[0].Rejoin(t.Context(), nodes[1].Addr); err != nil {
			t.Fatal(err)
		}
	}
}

// Rejoin makes a killed node a standby of the new primary.
func ExamplePostgresNode_Rejoin() {
	_ = func(t *testing.T, old, primary *testkit.PostgresNode) {
		if err := old.Rejoin(t.Context(), primary.Addr); err != nil {
			t.Fatal(err)
		}
	}
}

// Hold a synchronous primary's commits: freeze its WAL senders, find the
// sessions waiting for the standby, then fail over.
func ExamplePostgresNode_FreezeWALSenders() {
	_ = func(t *testing.T) {
		nodes := testkit.StartPostgresReplication(t, true)
		nodes[0].FreezeWALSenders(t)
		go func() { _, _ = testkit.PostgresConn(t, nodes[0].URL()).Exec(t.Context(), "CREATE TABLE t (id int)") }()
		waiting := nodes[0].WaitingForStandby(t)
		_ = waiting // pids: terminate one to see its commit become visible on the primary alone
		nodes[0].Kill(t)
		nodes[1].Promote(t)
	}
}

// A throwaway 3-node Galera cluster whose nodes a test may kill and
// restart: a restarted node rejoins by state transfer.
func ExampleStartGalera() {
	_ = func(t *testing.T) {
		nodes := testkit.StartGalera(t, 3)
		db := testkit.GaleraFor(t, []string{nodes[0].DSN(""), nodes[1].DSN(""), nodes[2].DSN("")})
		_ = db
		if err := nodes[2].Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := nodes[2].Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// DSN names a database on one node.
func ExampleGaleraNode_DSN() {
	_ = func(t *testing.T, node *testkit.GaleraNode) {
		db := testkit.MySQLFor(t, node.DSN("shop"))
		_ = db
	}
}
