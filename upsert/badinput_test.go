package upsert_test

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/upsertdynamo"
	"github.com/concurkit/concurkit/upsert/upsertmysql"
	"github.com/concurkit/concurkit/upsert/upsertpg"
)

func TestBadInput(t *testing.T) {
	good := map[string]any{"id": 1, "name": "ada"}
	var name string
	cases := []struct {
		name      string
		tbl       upsert.Table
		row       map[string]any
		returning []string
		dest      []any
	}{
		{"empty table", upsert.Table{KeyColumn: "id"}, good, nil, nil},
		// An empty KeyColumn means "id" (see TestDefaultKeyColumn): a row
		// without it is bad input.
		{"row without the default key", upsert.Table{Name: "profiles"}, map[string]any{"name": "ada"}, nil, nil},
		{"row without key", tbl, map[string]any{"name": "ada"}, nil, nil},
		{"nil row", tbl, nil, nil, nil},
		{"NUL in table", upsert.Table{Name: "pro\x00files", KeyColumn: "id"}, good, nil, nil},
		{"invalid UTF-8 column", tbl, map[string]any{"id": 1, "\xff": 1}, nil, nil},
		{"empty column", tbl, map[string]any{"id": 1, "": 1}, nil, nil},
		{"overlong column", tbl, map[string]any{"id": 1, string(make([]byte, 300)): 1}, nil, nil},
		{"returning without dest", tbl, good, []string{"name"}, nil},
		{"nil dest", tbl, good, []string{"name"}, []any{nil}},
		{"empty returning column", tbl, good, []string{""}, []any{&name}},
	}
	// Handles are real but every case must fail before any I/O; the nil
	// handles are cases of their own below.
	pool, _ := pgxpool.New(t.Context(), "postgres://127.0.0.1:1/none")
	t.Cleanup(pool.Close)
	db, _ := sql.Open("mysql", "root@tcp(127.0.0.1:1)/none")
	t.Cleanup(func() { db.Close() })
	ddb := dynamodb.New(dynamodb.Options{Region: "us-east-1"})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			errs := map[string]error{}
			_, errs["UpsertPostgres"] = upsertpg.Upsert(ctx, pool, tc.tbl, tc.row, tc.returning, tc.dest...)
			_, errs["InsertOrGetPostgres"] = upsertpg.InsertOrGet(ctx, pool, tc.tbl, tc.row, tc.returning, tc.dest...)
			_, errs["UpsertMySQL"] = upsertmysql.Upsert(ctx, db, tc.tbl, tc.row, tc.returning, tc.dest...)
			_, errs["InsertOrGetMySQL"] = upsertmysql.InsertOrGet(ctx, db, tc.tbl, tc.row, tc.returning, tc.dest...)
			if tc.returning == nil { // Insert and DynamoDB take no returning columns
				_, errs["InsertPostgres"] = upsertpg.Insert(ctx, pool, tc.tbl, tc.row)
				_, errs["InsertMySQL"] = upsertmysql.Insert(ctx, db, tc.tbl, tc.row)
				_, errs["InsertDynamoDB"] = upsertdynamo.Insert(ctx, ddb, tc.tbl, tc.row)
				_, _, errs["UpsertDynamoDB"] = upsertdynamo.Upsert(ctx, ddb, tc.tbl, tc.row)
				_, _, errs["InsertOrGetDynamoDB"] = upsertdynamo.InsertOrGet(ctx, ddb, tc.tbl, tc.row)
			}
			for fn, err := range errs {
				if !errors.Is(err, concurkit.ErrInvalidArgument) {
					t.Errorf("%s: %v; want ErrInvalidArgument", fn, err)
				}
			}
		})
	}

	t.Run("nil handles", func(t *testing.T) {
		// Every entry point, with an untyped nil and a typed nil pointer
		// in the interface (which a plain == nil misses).
		ctx := t.Context()
		var (
			nilPool *pgxpool.Pool
			nilDB   *sql.DB
			nilConn *sql.Conn
			nilTx   *sql.Tx
			nilDDB  *dynamodb.Client
		)
		var name string
		pg := func(h upsertpg.DBTX) map[string]func() error {
			return map[string]func() error{
				"upsertpg.Insert":      func() error { _, err := upsertpg.Insert(ctx, h, tbl, good); return err },
				"upsertpg.Upsert":      func() error { _, err := upsertpg.Upsert(ctx, h, tbl, good, []string{"name"}, &name); return err },
				"upsertpg.InsertOrGet": func() error { _, err := upsertpg.InsertOrGet(ctx, h, tbl, good, nil); return err },
			}
		}
		my := func(h upsertmysql.DBTX) map[string]func() error {
			return map[string]func() error{
				"upsertmysql.Insert":      func() error { _, err := upsertmysql.Insert(ctx, h, tbl, good); return err },
				"upsertmysql.Upsert":      func() error { _, err := upsertmysql.Upsert(ctx, h, tbl, good, []string{"name"}, &name); return err },
				"upsertmysql.InsertOrGet": func() error { _, err := upsertmysql.InsertOrGet(ctx, h, tbl, good, nil); return err },
			}
		}
		dyn := func(h upsertdynamo.Client) map[string]func() error {
			return map[string]func() error{
				"upsertdynamo.Insert":      func() error { _, err := upsertdynamo.Insert(ctx, h, tbl, good); return err },
				"upsertdynamo.Upsert":      func() error { _, _, err := upsertdynamo.Upsert(ctx, h, tbl, good); return err },
				"upsertdynamo.InsertOrGet": func() error { _, _, err := upsertdynamo.InsertOrGet(ctx, h, tbl, good); return err },
			}
		}
		for _, h := range []struct {
			name  string
			calls map[string]func() error
			msg   string // what the error says
		}{
			{"nil DBTX", pg(nil), "upsertpg: nil db"},
			{"typed nil *pgxpool.Pool", pg(nilPool), "upsertpg: nil db"},
			{"nil DBTX", my(nil), "upsertmysql: nil db"},
			{"typed nil *sql.DB", my(nilDB), "upsertmysql: nil db"},
			{"typed nil *sql.Conn", my(nilConn), "upsertmysql: nil db"},
			{"typed nil *sql.Tx", my(nilTx), "upsertmysql: nil db"},
			{"nil Client", dyn(nil), "upsertdynamo: nil client"},
			{"typed nil *dynamodb.Client", dyn(nilDDB), "upsertdynamo: nil client"},
		} {
			for fn, call := range h.calls {
				if err := call(); !errors.Is(err, concurkit.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), h.msg) {
					t.Errorf("%s(%s): %v; want ErrInvalidArgument saying %q", fn, h.name, err, h.msg)
				}
			}
		}
	})
	t.Run("dynamodb names", func(t *testing.T) {
		for _, tb := range []upsert.Table{{Name: "ab", KeyColumn: "id"}, {Name: "has space", KeyColumn: "id"}} {
			if _, err := upsertdynamo.Insert(t.Context(), ddb, tb, good); !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Errorf("table %q: %v; want ErrInvalidArgument", tb.Name, err)
			}
		}
	})
}
