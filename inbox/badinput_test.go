package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/inbox"
	"github.com/concurkit/concurkit/inbox/inboxmysql"
	"github.com/concurkit/concurkit/inbox/inboxpg"
	"github.com/concurkit/concurkit/migrations"
)

// unreachable handles: any I/O fails with a connection error, so an error
// matching ErrInvalidArgument proves the call rejected its input first.
func unreachable(t *testing.T) (*pgxpool.Pool, *sql.DB) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db, err := sql.Open("mysql", "nobody@tcp(127.0.0.1:1)/none?timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return pool, db
}

// TestBadInput: every bad argument is ErrInvalidArgument (ErrInvalidID for
// ids), before any I/O, on both adapters.
func TestBadInput(t *testing.T) {
	pool, db := unreachable(t)
	ctx := t.Context()
	noop := func(context.Context, pgx.Tx) error { return nil }
	myNoop := func(context.Context, *sql.Tx) error { return nil }
	badIDs := map[string]string{
		"empty":     "",
		"256 bytes": strings.Repeat("x", inbox.MaxIDLength+1),
		"not UTF-8": "\xff\xfe",
		"NUL":       "a\x00b",
	}
	badConfigs := map[string]*inbox.Config{
		"negative window":     {Window: -time.Second},
		"unknown gap policy":  {Gaps: inbox.GapPolicy(7)},
		"negative reap batch": {ReapBatch: -1},
		"table name too long": {Table: inbox.Table{Name: strings.Repeat("t", 70)}},
		"sequence table NUL":  {SequenceTable: inbox.Table{Name: "a\x00"}},
		"qualified name NUL":  {Table: inbox.Table{Schema: "s", Name: "x\x00"}},
	}

	pg, err := inboxpg.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	my, err := inboxmysql.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		name string
		err  error
	}
	var calls []call
	add := func(name string, err error) { calls = append(calls, call{name, err}) }
	var nilPool *pgxpool.Pool
	var nilDB *sql.DB
	_, err = inboxpg.New(nil, nil)
	add("pg New(nil)", err)
	_, err = inboxpg.New(nilPool, nil)
	add("pg New(typed nil)", err)
	_, err = inboxmysql.New(nil, nil)
	add("mysql New(nil)", err)
	_, err = inboxmysql.New(nilDB, nil)
	add("mysql New(typed nil)", err)
	_, err = inboxpg.Handle(ctx, nilPool, "c", "m", noop)
	add("pg Handle(typed nil)", err)
	_, err = inboxmysql.Handle(ctx, nilDB, "c", "m", myNoop)
	add("mysql Handle(typed nil)", err)
	for name, cfg := range badConfigs {
		_, err = inboxpg.New(pool, cfg)
		add("pg New: "+name, err)
		_, err = inboxmysql.New(db, cfg)
		add("mysql New: "+name, err)
	}
	_, err = pg.Handle(ctx, "c", "m", nil)
	add("pg Handle nil fn", err)
	_, err = my.Handle(ctx, "c", "m", nil)
	add("mysql Handle nil fn", err)
	for _, seq := range []int64{0, -1} {
		_, err = pg.HandleSequence(ctx, "c", "p", seq, noop)
		add("pg HandleSequence seq<1", err)
		_, err = my.HandleSequence(ctx, "c", "p", seq, myNoop)
		add("mysql HandleSequence seq<1", err)
	}
	_, err = pg.Reap(ctx)
	add("pg Reap without Window", err)
	_, err = my.Reap(ctx)
	add("mysql Reap without Window", err)
	for _, c := range calls {
		if !errors.Is(c.err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", c.name, c.err)
		}
	}

	for name, id := range badIDs {
		for _, err := range []error{
			func() error { _, err := pg.Handle(ctx, id, "m", noop); return err }(),
			func() error { _, err := pg.Handle(ctx, "c", id, noop); return err }(),
			func() error { _, err := pg.HandleSequence(ctx, "c", id, 1, noop); return err }(),
			func() error { _, err := pg.HandleSequence(ctx, id, "p", 1, noop); return err }(),
			func() error { _, err := my.Handle(ctx, id, "m", myNoop); return err }(),
			func() error { _, err := my.Handle(ctx, "c", id, myNoop); return err }(),
			func() error { _, err := my.HandleSequence(ctx, "c", id, 1, myNoop); return err }(),
			func() error { _, err := inboxmysql.Handle(ctx, db, "c", id, myNoop); return err }(),
		} {
			if !errors.Is(err, inbox.ErrInvalidID) || !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("id %s: %v, want ErrInvalidID", name, err)
			}
		}
	}
	if err := inbox.ValidateID("message id", strings.Repeat("€", 85)); err != nil {
		t.Errorf("a 255-byte id: %v", err)
	}
}

// TestDefaultsMatchMigrations: the default table names are the tables the
// toolkit migrations create.
func TestDefaultsMatchMigrations(t *testing.T) {
	for _, d := range []migrations.Dialect{migrations.Postgres, migrations.MySQL} {
		objs, err := migrations.Objects(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{inbox.DefaultTable, inbox.DefaultSequenceTable} {
			if !slices.ContainsFunc(objs, func(o migrations.Object) bool { return o.Kind == "table" && o.Name == name }) {
				t.Errorf("%s: migrations.Objects has no table %s", d, name)
			}
		}
	}
}

func TestGapErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		err  *inbox.GapError
		want string
	}{
		{&inbox.GapError{Consumer: "billing", Producer: "orders-1", From: 5, To: 7}, `inbox: sequence gap: consumer "billing", producer "orders-1": missing 5 through 7`},
		{&inbox.GapError{Consumer: "billing", Producer: "orders-1", From: 3, To: 3}, `inbox: sequence gap: consumer "billing", producer "orders-1": missing 3`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if !errors.Is(tc.err, inbox.ErrSequenceGap) || tc.err.ErrorType() != "sequence_gap" {
			t.Errorf("%v does not match ErrSequenceGap", tc.err)
		}
	}
	if inbox.RefuseGaps.String() != "RefuseGaps" || inbox.ApplyGaps.String() != "ApplyGaps" || inbox.GapPolicy(9).String() != "GapPolicy(9)" {
		t.Error("GapPolicy.String")
	}
}
