package inbox_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/inbox/inboxmysql"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/testkit"
)

// TestMySQLWindowIgnoresLoc: consumers whose DSNs have different loc
// settings agree on an entry's age. An entry recorded through a DSN with
// loc=America/New_York one minute ago must still be within a 5-minute
// window for a consumer on a UTC DSN, and must not be reaped by it.
// (Times bound as time.Time were stored as the wall clock of the writer's
// loc: five hours early, so the entry counted as expired at once.)
func TestMySQLWindowIgnoresLoc(t *testing.T) {
	dsn := testkit.MySQLDSN(t)
	if err := migrations.Up(t.Context(), migrations.MySQL, dsn); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	open := func(loc string, at time.Time) *inboxmysql.Inbox {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Loc, err = time.LoadLocation(loc); err != nil {
			t.Fatal(err)
		}
		ib, err := inboxmysql.New(testkit.MySQLFor(t, cfg.FormatDSN()), &inbox.Config{Window: 5 * time.Minute, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		return ib
	}
	handle := func(ib *inboxmysql.Inbox) bool {
		applied, err := ib.Handle(t.Context(), "billing", "m1", func(context.Context, *sql.Tx) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return applied
	}
	if !handle(open("America/New_York", t0)) {
		t.Fatal("first delivery not applied")
	}
	later := open("UTC", t0.Add(time.Minute))
	if handle(later) {
		t.Fatal("redelivery one minute later, through a UTC DSN, applied again: the entry's time was read shifted by the writer's loc")
	}
	if n, err := later.Reap(t.Context()); err != nil || n != 0 {
		t.Fatalf("Reap one minute after the entry = %d, %v; want 0", n, err)
	}
}
