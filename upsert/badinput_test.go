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
		ctx := t.Context()
		var nilPool *pgxpool.Pool
		var nilDB *sql.DB
		var nilDDB *dynamodb.Client
		errs := map[string]error{}
		_, errs["pgx nil"] = upsert.InsertPostgres(ctx, nil, tbl, good)
		_, errs["pgx typed nil"] = upsert.UpsertPostgres(ctx, nilPool, tbl, good, nil)
		_, errs["pgx typed nil 2"] = upsert.InsertOrGetPostgres(ctx, nilPool, tbl, good, nil)
		_, errs["sql nil"] = upsert.InsertMySQL(ctx, nil, tbl, good)
		_, errs["sql typed nil"] = upsert.UpsertMySQL(ctx, nilDB, tbl, good, nil)
		_, errs["sql typed nil 2"] = upsert.InsertOrGetMySQL(ctx, nilDB, tbl, good, nil)
		_, errs["dynamodb nil"] = upsert.InsertDynamoDB(ctx, nil, tbl, good)
		_, _, errs["dynamodb typed nil"] = upsert.UpsertDynamoDB(ctx, nilDDB, tbl, good)
		_, _, errs["dynamodb typed nil 2"] = upsert.InsertOrGetDynamoDB(ctx, nilDDB, tbl, good)
		for fn, err := range errs {
			if !errors.Is(err, upsert.ErrInvalidArgument) {
				t.Errorf("%s: %v; want ErrInvalidArgument", fn, err)
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
