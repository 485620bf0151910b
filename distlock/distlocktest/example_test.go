package distlocktest_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/testkit"
)

// myLocker stands for a Locker of your own; here it wraps pglock with a
// token sequence of its own, as an application's adapter might.
type myLocker struct{ *pglock.Locker }

func newMyLocker(t *testing.T, pool *pgxpool.Pool) distlock.Locker {
	l, err := pglock.New(pool, &pglock.Config{Sequence: "my_lock_tokens"})
	if err != nil {
		t.Fatal(err)
	}
	return myLocker{l}
}

// testMyLocker is a test of your own package (name it TestMyLocker there):
// it checks your Locker against the distlock contract.
func testMyLocker(t *testing.T) {
	// Every instance must use the same lock service: one database here.
	pool := testkit.PostgresPoolFor(t, testkit.PostgresServerURL(t))
	distlocktest.Run(t, func(t *testing.T) distlock.Locker {
		return newMyLocker(t, pool) // a new instance, as another process would have
	}, distlocktest.Options{
		// Zero Options: default TTLs; a holder "paused" past its TTL
		// waits until its lease ended locally (Expire nil); the
		// Kleppmann scenario writes to PostgresStore on the test
		// PostgreSQL (Store nil).
	})
}

// Run needs the *testing.T of a test, so this example only shows the
// test to write (testMyLocker above); go test runs it in your package.
func ExampleRun() {
	_ = testMyLocker
}
