package upsert_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/upsert"
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
		{"empty table", upsert.Table{Key: "id"}, good, nil, nil},
		{"empty key", upsert.Table{Name: "profiles"}, good, nil, nil},
		{"row without key", tbl, map[string]any{"name": "ada"}, nil, nil},
		{"nil row", tbl, nil, nil, nil},
		{"NUL in table", upsert.Table{Name: "pro\x00files", Key: "id"}, good, nil, nil},
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
			_, errs["UpsertPostgres"] = upsert.UpsertPostgres(ctx, pool, tc.tbl, tc.row, tc.returning, tc.dest...)
			_, errs["InsertOrGetPostgres"] = upsert.InsertOrGetPostgres(ctx, pool, tc.tbl, tc.row, tc.returning, tc.dest...)
			_, errs["UpsertMySQL"] = upsert.UpsertMySQL(ctx, db, tc.tbl, tc.row, tc.returning, tc.dest...)
			_, errs["InsertOrGetMySQL"] = upsert.InsertOrGetMySQL(ctx, db, tc.tbl, tc.row, tc.returning, tc.dest...)
			if tc.returning == nil { // Insert and DynamoDB take no returning columns
				_, errs["InsertPostgres"] = upsert.InsertPostgres(ctx, pool, tc.tbl, tc.row)
				_, errs["InsertMySQL"] = upsert.InsertMySQL(ctx, db, tc.tbl, tc.row)
				_, errs["InsertDynamoDB"] = upsert.InsertDynamoDB(ctx, ddb, tc.tbl, tc.row)
				_, _, errs["UpsertDynamoDB"] = upsert.UpsertDynamoDB(ctx, ddb, tc.tbl, tc.row)
				_, _, errs["InsertOrGetDynamoDB"] = upsert.InsertOrGetDynamoDB(ctx, ddb, tc.tbl, tc.row)
			}
			for fn, err := range errs {
				if !errors.Is(err, upsert.ErrInvalidArgument) {
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
		pg := func(h upsert.DBTX) map[string]func() error {
			return map[string]func() error{
				"InsertPostgres":      func() error { _, err := upsert.InsertPostgres(ctx, h, tbl, good); return err },
				"UpsertPostgres":      func() error { _, err := upsert.UpsertPostgres(ctx, h, tbl, good, []string{"name"}, &name); return err },
				"InsertOrGetPostgres": func() error { _, err := upsert.InsertOrGetPostgres(ctx, h, tbl, good, nil); return err },
			}
		}
		my := func(h upsert.SQLDB) map[string]func() error {
			return map[string]func() error{
				"InsertMySQL":      func() error { _, err := upsert.InsertMySQL(ctx, h, tbl, good); return err },
				"UpsertMySQL":      func() error { _, err := upsert.UpsertMySQL(ctx, h, tbl, good, []string{"name"}, &name); return err },
				"InsertOrGetMySQL": func() error { _, err := upsert.InsertOrGetMySQL(ctx, h, tbl, good, nil); return err },
			}
		}
		dyn := func(h upsert.DynamoDBClient) map[string]func() error {
			return map[string]func() error{
				"InsertDynamoDB":      func() error { _, err := upsert.InsertDynamoDB(ctx, h, tbl, good); return err },
				"UpsertDynamoDB":      func() error { _, _, err := upsert.UpsertDynamoDB(ctx, h, tbl, good); return err },
				"InsertOrGetDynamoDB": func() error { _, _, err := upsert.InsertOrGetDynamoDB(ctx, h, tbl, good); return err },
			}
		}
		for _, h := range []struct {
			name  string
			calls map[string]func() error
		}{
			{"nil DBTX", pg(nil)},
			{"typed nil *pgxpool.Pool", pg(nilPool)},
			{"nil SQLDB", my(nil)},
			{"typed nil *sql.DB", my(nilDB)},
			{"typed nil *sql.Conn", my(nilConn)},
			{"typed nil *sql.Tx", my(nilTx)},
			{"nil DynamoDBClient", dyn(nil)},
			{"typed nil *dynamodb.Client", dyn(nilDDB)},
		} {
			for fn, call := range h.calls {
				if err := call(); !errors.Is(err, upsert.ErrInvalidArgument) {
					t.Errorf("%s(%s): %v; want ErrInvalidArgument", fn, h.name, err)
				}
			}
		}
	})
	t.Run("dynamodb names", func(t *testing.T) {
		for _, tb := range []upsert.Table{{Name: "ab", Key: "id"}, {Name: "has space", Key: "id"}} {
			if _, err := upsert.InsertDynamoDB(t.Context(), ddb, tb, good); !errors.Is(err, upsert.ErrInvalidArgument) {
				t.Errorf("table %q: %v; want ErrInvalidArgument", tb.Name, err)
			}
		}
	})
}
