package optimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticdynamo"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/testkit"
)

// store is one adapter bound to one table shaped (id, <col>, version):
// inventory (col stock) or counters (col value). The same tests run
// against every store.
type store struct {
	pkg string // the adapter, as hook events name it
	tbl optimistic.Table
	col string
	// updateIn calls the adapter's Update helper on this store's handle.
	updateIn func(ctx context.Context, tbl optimistic.Table, key any, version int64, set map[string]any) (int64, error)
	// read returns the row's column value and version.
	read func(ctx context.Context, id int64) (val, version int64, err error)
	// insert adds a row with version 1.
	insert func(t testing.TB, id, val int64)
	// setVersion stores version v in row id behind the helpers' back.
	setVersion func(t testing.TB, id, v int64)
	// worker returns a store of the same table on its own connection.
	worker func(t testing.TB) *store
}

func (s *store) update(ctx context.Context, key any, version int64, set map[string]any) (int64, error) {
	return s.updateIn(ctx, s.tbl, key, version, set)
}

const maxWorkers = 64

type backend struct {
	name string
	open func(t testing.TB, table, col string) *store
}

var backends = []backend{
	{"postgres", openPostgres},
	{"mariadb", openMySQL},
	{"dynamodb", openDynamoDB},
}

const (
	pgDDL = `CREATE TABLE inventory (id bigint PRIMARY KEY, sku text NOT NULL, stock integer NOT NULL, version bigint NOT NULL DEFAULT 1);
CREATE TABLE counters (id bigint PRIMARY KEY, value bigint NOT NULL DEFAULT 0, version bigint NOT NULL DEFAULT 1)`
	myInventory = `CREATE TABLE inventory (id BIGINT PRIMARY KEY, sku VARCHAR(64) NOT NULL, stock INT NOT NULL, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB`
	myCounters  = `CREATE TABLE counters (id BIGINT PRIMARY KEY, value BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 1) ENGINE=InnoDB`
)

// extraCols and extraVals fill inventory's sku, which the example DDL makes
// NOT NULL without a default.
func extraCols(table string) string {
	if table == "inventory" {
		return ", sku"
	}
	return ""
}

func extraVals(table string) string {
	if table == "inventory" {
		return ", 'sku-1'"
	}
	return ""
}

// pgPool returns a pool on an isolated schema (testkit: MaxConns 100, room
// for one connection per worker) with the example tables.
func pgPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := testkit.Postgres(t)
	if _, err := pool.Exec(t.Context(), pgDDL); err != nil {
		t.Fatal(err)
	}
	return pool
}

func openPostgres(t testing.TB, table, col string) *store {
	return pgStore(pgPool(t), table, col)
}

func pgStore(pool *pgxpool.Pool, table, col string) *store {
	tbl := optimistic.Table{Name: table, KeyColumn: "id", VersionColumn: "version"}
	var mk func(db optimisticpg.DBTX) *store
	mk = func(db optimisticpg.DBTX) *store {
		return &store{
			pkg: "optimisticpg", tbl: tbl, col: col,
			updateIn: func(ctx context.Context, tbl optimistic.Table, key any, v int64, set map[string]any) (int64, error) {
				return optimisticpg.Update(ctx, db, tbl, key, v, set)
			},
			read: func(ctx context.Context, id int64) (val, ver int64, err error) {
				err = db.QueryRow(ctx, "SELECT "+col+", version FROM "+table+" WHERE id = $1", id).Scan(&val, &ver)
				return
			},
			insert: func(t testing.TB, id, val int64) {
				t.Helper()
				if _, err := db.Exec(t.Context(), "INSERT INTO "+table+" (id, "+col+extraCols(table)+") VALUES ($1, $2"+extraVals(table)+")", id, val); err != nil {
					t.Fatal(err)
				}
			},
			setVersion: func(t testing.TB, id, v int64) {
				t.Helper()
				if _, err := db.Exec(t.Context(), "UPDATE "+table+" SET version = $2 WHERE id = $1", id, v); err != nil {
					t.Fatal(err)
				}
			},
			worker: func(t testing.TB) *store {
				t.Helper()
				c, err := pool.Acquire(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Release)
				return mk(c)
			},
		}
	}
	return mk(pool)
}

// myDB returns a *sql.DB on an isolated database (testkit: 100 open
// connections) with the example tables.
func myDB(t testing.TB) *sql.DB {
	t.Helper()
	db := testkit.MySQL(t)
	for _, ddl := range []string{myInventory, myCounters} {
		if _, err := db.ExecContext(t.Context(), ddl); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func openMySQL(t testing.TB, table, col string) *store {
	return myStore(myDB(t), table, col)
}

func myStore(pool *sql.DB, table, col string) *store {
	tbl := optimistic.Table{Name: table, KeyColumn: "id", VersionColumn: "version"}
	var mk func(db optimisticmysql.DBTX) *store
	mk = func(db optimisticmysql.DBTX) *store {
		return &store{
			pkg: "optimisticmysql", tbl: tbl, col: col,
			updateIn: func(ctx context.Context, tbl optimistic.Table, key any, v int64, set map[string]any) (int64, error) {
				return optimisticmysql.Update(ctx, db, tbl, key, v, set)
			},
			read: func(ctx context.Context, id int64) (val, ver int64, err error) {
				err = db.QueryRowContext(ctx, "SELECT "+col+", version FROM "+table+" WHERE id = ?", id).Scan(&val, &ver)
				return
			},
			insert: func(t testing.TB, id, val int64) {
				t.Helper()
				if _, err := db.ExecContext(t.Context(), "INSERT INTO "+table+" (id, "+col+extraCols(table)+") VALUES (?, ?"+extraVals(table)+")", id, val); err != nil {
					t.Fatal(err)
				}
			},
			setVersion: func(t testing.TB, id, v int64) {
				t.Helper()
				if _, err := db.ExecContext(t.Context(), "UPDATE "+table+" SET version = ? WHERE id = ?", v, id); err != nil {
					t.Fatal(err)
				}
			},
			worker: func(t testing.TB) *store {
				t.Helper()
				c, err := pool.Conn(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return mk(c)
			},
		}
	}
	return mk(pool)
}

func openDynamoDB(t testing.TB, table, col string) *store {
	t.Helper()
	client, prefix := testkit.DynamoDB(t)
	name := prefix + table
	ctx := t.Context()
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeN}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil { // testkit deletes the prefix's tables at cleanup
		t.Fatal(err)
	}
	tbl := optimistic.Table{Name: name, KeyColumn: "id", VersionColumn: "version"}
	n := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	s := &store{
		pkg: "optimisticdynamo", tbl: tbl, col: col,
		updateIn: func(ctx context.Context, tbl optimistic.Table, key any, v int64, set map[string]any) (int64, error) {
			return optimisticdynamo.Update(ctx, client, tbl, key, v, set)
		},
		read: func(ctx context.Context, id int64) (val, ver int64, err error) {
			out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: aws.String(name), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"id": n(id)},
			})
			if err != nil {
				return 0, 0, err
			}
			if out.Item == nil {
				return 0, 0, sql.ErrNoRows
			}
			num := func(a string) int64 {
				m, _ := out.Item[a].(*types.AttributeValueMemberN)
				if m == nil {
					return -1
				}
				x, _ := strconv.ParseInt(m.Value, 10, 64)
				return x
			}
			return num(col), num("version"), nil
		},
		insert: func(t testing.TB, id, val int64) {
			t.Helper()
			_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{
				TableName: aws.String(name),
				Item:      map[string]types.AttributeValue{"id": n(id), col: n(val), "version": n(1)},
			})
			if err != nil {
				t.Fatal(err)
			}
		},
	}
	s.setVersion = func(t testing.TB, id, v int64) {
		t.Helper()
		_, err := client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
			TableName:                 aws.String(name),
			Key:                       map[string]types.AttributeValue{"id": n(id)},
			UpdateExpression:          aws.String("SET version = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(v)},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s.worker = func(testing.TB) *store { return s } // HTTP: every call is independent
	return s
}

func TestUpdate(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			checkUpdate(t, b.open(t, "inventory", "stock"))
		})
	}
}

// checkUpdate exercises success, conflict and not-found on one store.
func checkUpdate(t *testing.T, s *store) {
	t.Helper()
	ctx := t.Context()
	s.insert(t, 1, 10)

	v, err := s.update(ctx, int64(1), 1, map[string]any{"stock": 9})
	if err != nil || v != 2 {
		t.Fatalf("update at version 1 = %d, %v; want 2, nil", v, err)
	}
	if val, ver, err := s.read(ctx, 1); err != nil || val != 9 || ver != 2 {
		t.Fatalf("after update: stock %d version %d err %v; want 9, 2", val, ver, err)
	}
	// Stale version: the row exists, so this is a conflict and nothing changes.
	if v, err := s.update(ctx, int64(1), 1, map[string]any{"stock": 0}); !errors.Is(err, optimistic.ErrConflict) || v != 0 {
		t.Fatalf("stale update = %d, %v; want ErrConflict", v, err)
	}
	// A version ahead of the row's is a conflict as well (version 3 = expected+1 of the stale try).
	if _, err := s.update(ctx, int64(1), 3, nil); !errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("future version: %v; want ErrConflict", err)
	}
	if val, ver, _ := s.read(ctx, 1); val != 9 || ver != 2 {
		t.Fatalf("after conflicts: stock %d version %d; want 9, 2 (unchanged)", val, ver)
	}
	// Missing key.
	_, err = s.update(ctx, int64(404), 1, map[string]any{"stock": 1})
	if !errors.Is(err, optimistic.ErrNotFound) || !errors.Is(err, sql.ErrNoRows) || errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("missing key: %v; want ErrNotFound matching sql.ErrNoRows", err)
	}
	// No columns: only the version moves.
	if v, err := s.update(ctx, int64(1), 2, nil); err != nil || v != 3 {
		t.Fatalf("version-only update = %d, %v; want 3", v, err)
	}
	if val, ver, _ := s.read(ctx, 1); val != 9 || ver != 3 {
		t.Fatalf("after touch: stock %d version %d; want 9, 3", val, ver)
	}
}

// TestConflictHook: every adapter reports each ErrConflict, and only
// conflicts, to the Conflict hook of the call's context, with its package
// and the table name.
func TestConflictHook(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t, "inventory", "stock")
			s.insert(t, 1, 10)
			var mu sync.Mutex
			var got []observe.ConflictEvent
			ctx := observe.WithHooks(t.Context(), &observe.Hooks{Conflict: func(_ context.Context, e observe.ConflictEvent) {
				mu.Lock()
				got = append(got, e)
				mu.Unlock()
			}})
			if _, err := s.update(ctx, int64(1), 1, map[string]any{"stock": 9}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.update(ctx, int64(404), 1, nil); !errors.Is(err, optimistic.ErrNotFound) {
				t.Fatalf("missing key: %v; want ErrNotFound", err)
			}
			if _, err := s.update(ctx, int64(1), 1, map[string]any{"stock": 8}); !errors.Is(err, optimistic.ErrConflict) {
				t.Fatalf("stale version: %v; want ErrConflict", err)
			}
			// Without hooks on its context a conflict reports nothing.
			if _, err := s.update(t.Context(), int64(1), 1, nil); !errors.Is(err, optimistic.ErrConflict) {
				t.Fatalf("stale version: %v; want ErrConflict", err)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []observe.ConflictEvent{{Package: s.pkg, Table: s.tbl.Name}}
			if !slices.Equal(got, want) {
				t.Fatalf("conflict events %+v; want %+v (success and not-found report none)", got, want)
			}
		})
	}
}

// TestTableDefaults: a Table with only its Name uses the columns "id" and
// "version" on every backend.
func TestTableDefaults(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t, "inventory", "stock")
			s.insert(t, 1, 10)
			s.tbl.KeyColumn, s.tbl.VersionColumn = "", ""
			if v, err := s.update(t.Context(), int64(1), 1, map[string]any{"stock": 9}); err != nil || v != 2 {
				t.Fatalf("update with default columns = %d, %v; want 2, nil", v, err)
			}
			if val, ver, err := s.read(t.Context(), 1); err != nil || val != 9 || ver != 2 {
				t.Fatalf("after update: stock %d version %d err %v; want 9, 2", val, ver, err)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	good := optimistic.Table{Name: "inventory", KeyColumn: "id", VersionColumn: "version"}
	cases := []struct {
		name    string
		tbl     func(optimistic.Table) optimistic.Table
		version int64
		set     map[string]any
	}{
		{"zero version", nil, 0, nil},
		{"negative version", nil, -1, nil},
		{"empty table", func(t optimistic.Table) optimistic.Table { t.Name = ""; return t }, 1, nil},
		// Empty column fields mean their defaults ("id", "version"; see
		// TestTableDefaults), so these are the same column under a default.
		{"key is the default version", func(t optimistic.Table) optimistic.Table { t.KeyColumn, t.VersionColumn = "version", ""; return t }, 1, nil},
		{"version is the default key", func(t optimistic.Table) optimistic.Table { t.KeyColumn, t.VersionColumn = "", "id"; return t }, 1, nil},
		{"key is version", func(t optimistic.Table) optimistic.Table { t.VersionColumn = t.KeyColumn; return t }, 1, nil},
		{"NUL in table", func(t optimistic.Table) optimistic.Table { t.Name = "inv\x00entory"; return t }, 1, nil},
		{"overlong column", func(t optimistic.Table) optimistic.Table { t.KeyColumn = string(make([]byte, 300)); return t }, 1, nil},
		{"invalid UTF-8 column", nil, 1, map[string]any{"\xff": 1}},
		{"empty set column", nil, 1, map[string]any{"": 1}},
		{"set assigns version", nil, 1, map[string]any{"version": 9}},
		{"set assigns key", nil, 1, map[string]any{"id": 9}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t, "inventory", "stock")
			for _, tc := range cases {
				tbl := s.tbl
				if tc.tbl != nil {
					tbl = tc.tbl(tbl)
				}
				_, err := s.updateIn(t.Context(), tbl, int64(1), tc.version, tc.set)
				if !errors.Is(err, concurkit.ErrInvalidArgument) {
					t.Errorf("%s: err = %v; want ErrInvalidArgument", tc.name, err)
				}
			}
		})
	}
	t.Run("nil handles", func(t *testing.T) {
		ctx := t.Context()
		var pool *pgxpool.Pool
		var db *sql.DB
		var ddb *dynamodb.Client
		errs := map[string]error{}
		_, errs["optimisticpg: nil db"] = optimisticpg.Update(ctx, nil, good, 1, 1, nil)
		_, errs["optimisticpg: nil db (typed nil pool)"] = optimisticpg.Update(ctx, pool, good, 1, 1, nil)
		_, errs["optimisticmysql: nil db"] = optimisticmysql.Update(ctx, nil, good, 1, 1, nil)
		_, errs["optimisticmysql: nil db (typed nil DB)"] = optimisticmysql.Update(ctx, db, good, 1, 1, nil)
		_, errs["optimisticdynamo: nil client"] = optimisticdynamo.Update(ctx, nil, good, 1, 1, nil)
		_, errs["optimisticdynamo: nil client (typed nil)"] = optimisticdynamo.Update(ctx, ddb, good, 1, 1, nil)
		_, errs["optimistic: nil function (DoValue)"] = optimistic.DoValue[int](ctx, retry.Policy{}, nil)
		errs["optimistic: nil function (Do)"] = optimistic.Do(ctx, retry.Policy{}, nil)
		for name, err := range errs {
			// The message says which package and what: "<pkg>: nil <what>".
			want, _, _ := strings.Cut(name, " (")
			if !errors.Is(err, concurkit.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), want) {
				t.Errorf("%s: %v; want ErrInvalidArgument saying %q", name, err, want)
			}
		}
	})
}
