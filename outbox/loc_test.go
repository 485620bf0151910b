package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxmysql"
	"github.com/concurkit/concurkit/testkit"
)

// TestMySQLTimesIgnoreLoc: a message's CreatedAt reads back as written
// whatever the DSN's loc and parseTime, and a relay whose DSN has another
// loc sees the same instant. (Times bound as time.Time were stored as the
// wall clock of the writer's loc: with loc=America/New_York a message
// written at 12:00 UTC read back as 07:00 UTC.)
func TestMySQLTimesIgnoreLoc(t *testing.T) {
	dsn := testkit.MySQLDSN(t)
	if err := migrations.Up(t.Context(), migrations.MySQL, dsn); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 12, 0, 0, 123456000, time.UTC)
	now := func() time.Time { return at }
	ny := withLoc(t, dsn, "America/New_York", false)
	writer, err := outboxmysql.New(testkit.MySQLFor(t, ny), &outbox.Config{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Add(t.Context(), testkit.MySQLFor(t, ny), outbox.Message{Topic: "t", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for _, params := range []struct {
		loc       string
		parseTime bool
	}{{"UTC", false}, {"UTC", true}, {"Asia/Tokyo", false}, {"Asia/Tokyo", true}, {"America/New_York", true}} {
		relay, err := outboxmysql.New(testkit.MySQLFor(t, withLoc(t, dsn, params.loc, params.parseTime)), &outbox.Config{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		var got []outbox.Message
		_, err = relay.Claim(t.Context(), 10, func(_ context.Context, msgs []outbox.Message) error {
			got = msgs
			return errRollback // read only: leave the row unpublished
		})
		if len(got) != 1 || !got[0].CreatedAt.Equal(at) {
			t.Fatalf("DSN %+v: claimed %d messages, CreatedAt %v, want %v (claim error %v)", params, len(got), got, at, err)
		}
	}
}

var errRollback = errors.New("read only")

// withLoc returns dsn with its loc and parseTime set.
func withLoc(t testing.TB, dsn, loc string, parseTime bool) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Loc, err = time.LoadLocation(loc); err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime = parseTime
	return cfg.FormatDSN()
}
