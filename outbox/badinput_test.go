package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/outboxmysql"
	"github.com/concurkit/concurkit/outbox/outboxpg"
)

// TestBadInput: every bad argument is ErrInvalidArgument (invalid messages
// ErrInvalidMessage), before any I/O: the handles point at a closed port,
// so any I/O would fail otherwise.
func TestBadInput(t *testing.T) {
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db, err := sql.Open("mysql", "nobody@tcp(127.0.0.1:1)/none?timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pg, err := outboxpg.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	my, err := outboxmysql.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	badMessages := map[string]outbox.Message{
		"no topic":     {},
		"long topic":   {Topic: strings.Repeat("t", outbox.MaxTopicLength+1)},
		"long key":     {Topic: "t", Key: strings.Repeat("k", outbox.MaxKeyLength+1)},
		"long ID":      {Topic: "t", ID: strings.Repeat("i", 256)},
		"ID not UTF-8": {Topic: "t", ID: "\xff"},
		"ID with NUL":  {Topic: "t", ID: "a\x00"},
	}
	for name, m := range badMessages {
		for _, err := range []error{
			func() error { _, err := pg.Add(ctx, pool, m); return err }(),
			func() error { _, err := outboxpg.Add(ctx, pool, m); return err }(),
			func() error { _, err := my.Add(ctx, db, m); return err }(),
			func() error { _, err := outboxmysql.Add(ctx, db, m); return err }(),
			m.Validate(),
		} {
			if !errors.Is(err, outbox.ErrInvalidMessage) || !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("message %s: %v, want ErrInvalidMessage", name, err)
			}
		}
	}

	var nilPool *pgxpool.Pool
	var nilDB *sql.DB
	var nilTx pgx.Tx
	var nilSQLTx *sql.Tx
	publish := func(context.Context, []outbox.Message) error { return nil }
	pub := outbox.PublisherFunc(publish)
	calls := map[string]error{}
	add := func(name string, err error) { calls[name] = err }
	_, err = outboxpg.New(nil, nil)
	add("pg New(nil)", err)
	_, err = outboxpg.New(nilPool, nil)
	add("pg New(typed nil)", err)
	_, err = outboxmysql.New(nil, nil)
	add("mysql New(nil)", err)
	_, err = outboxmysql.New(nilDB, nil)
	add("mysql New(typed nil)", err)
	for name, cfg := range map[string]*outbox.Config{
		"negative retention":  {Retention: -time.Second},
		"negative reap batch": {ReapBatch: -1},
		"bad table":           {Table: outbox.Table{Name: "a\x00"}},
		"long table":          {Table: outbox.Table{Schema: "s", Name: strings.Repeat("x", 65)}},
	} {
		_, err = outboxpg.New(pool, cfg)
		add("pg New "+name, err)
		_, err = outboxmysql.New(db, cfg)
		add("mysql New "+name, err)
	}
	_, err = outboxpg.Add(ctx, nilTx, outbox.Message{Topic: "t"})
	add("pg Add(nil tx)", err)
	_, err = outboxmysql.Add(ctx, nilSQLTx, outbox.Message{Topic: "t"})
	add("mysql Add(nil tx)", err)
	for _, n := range []int{0, -1, outbox.MaxBatchSize + 1} {
		_, err = pg.Claim(ctx, n, publish)
		add("pg Claim n", err)
		_, err = my.Claim(ctx, n, publish)
		add("mysql Claim n", err)
	}
	_, err = pg.Claim(ctx, 1, nil)
	add("pg Claim nil publish", err)
	_, err = my.Claim(ctx, 1, nil)
	add("mysql Claim nil publish", err)
	_, err = outbox.NewRelay(nil, pub, nil)
	add("NewRelay nil source", err)
	_, err = outbox.NewRelay((*outboxpg.Store)(nil), pub, nil)
	add("NewRelay typed nil source", err)
	_, err = outbox.NewRelay(pg, nil, nil)
	add("NewRelay nil publisher", err)
	_, err = outbox.NewRelay(pg, outbox.PublisherFunc(nil), nil)
	add("NewRelay nil PublisherFunc", err)
	for name, cfg := range map[string]*outbox.RelayConfig{
		"negative batch":    {BatchSize: -1},
		"batch too large":   {BatchSize: outbox.MaxBatchSize + 1},
		"negative poll":     {PollInterval: -1},
		"negative timeout":  {PublishTimeout: -1},
		"negative retry":    {RetryDelay: -1},
		"negative max wait": {MaxRetryDelay: -1},
	} {
		_, err = outbox.NewRelay(pg, pub, cfg)
		add("NewRelay "+name, err)
	}
	for name, err := range calls {
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for range 1000 {
		id := outbox.NewID()
		if len(id) != 36 || id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
			t.Fatalf("NewID() = %q: not a UUIDv7", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
		if id[:8] < prev[:min(8, len(prev))] {
			t.Fatalf("NewID() %q sorts before the earlier %q", id, prev)
		}
		prev = id
	}
}

// TestDefaultsMatchMigrations: the default table is the one the toolkit
// migrations create.
func TestDefaultsMatchMigrations(t *testing.T) {
	for _, d := range []migrations.Dialect{migrations.Postgres, migrations.MySQL} {
		objs, err := migrations.Objects(d)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range objs {
			found = found || o.Kind == "table" && o.Name == outbox.DefaultTable
		}
		if !found {
			t.Errorf("%s: migrations.Objects has no table %s", d, outbox.DefaultTable)
		}
	}
}
