package upsert_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/testkit"
	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/upsertdynamo"
	"github.com/concurkit/concurkit/upsert/upsertmysql"
	"github.com/concurkit/concurkit/upsert/upsertpg"
)

type profile struct {
	ID     int64
	Name   string
	Visits int64
}

func (p profile) row() map[string]any {
	return map[string]any{"id": p.ID, "name": p.Name, "visits": p.Visits}
}

var returning = []string{"id", "name", "visits"}

func (p *profile) dest() []any { return []any{&p.ID, &p.Name, &p.Visits} }

// store is one adapter bound to the profiles table; the same tests run on
// every store.
type store struct {
	tbl         *upsert.Table // the table the calls use (tests may change it)
	insert      func(ctx context.Context, p profile) (bool, error)
	upsert      func(ctx context.Context, p profile) (profile, bool, error)
	insertOrGet func(ctx context.Context, p profile) (profile, bool, error)
	worker      func(t testing.TB) *store
}

const maxWorkers = 64

const (
	pgDDL = `CREATE TABLE profiles (id bigint PRIMARY KEY, name text NOT NULL, visits bigint NOT NULL DEFAULT 0)`
	myDDL = `CREATE TABLE profiles (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL, visits BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`
)

var tbl = upsert.Table{Name: "profiles", KeyColumn: "id"}

type backend struct {
	name string
	open func(t testing.TB) *store
}

var backends = []backend{
	{"postgres", openPostgres},
	{"mariadb", func(t testing.TB) *store { return openMySQL(t, false) }},
	{"mariadb-clientFoundRows", func(t testing.TB) *store { return openMySQL(t, true) }},
	{"dynamodb", openDynamoDB},
	{"galera", openGalera},
}

// pgPool returns a pool on an isolated schema (testkit: MaxConns 100, room
// for one connection per worker) holding the profiles table.
func pgPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := testkit.Postgres(t)
	if _, err := pool.Exec(t.Context(), pgDDL); err != nil {
		t.Fatal(err)
	}
	return pool
}

func openPostgres(t testing.TB) *store {
	pool := pgPool(t)
	tb := tbl
	var mk func(db upsertpg.DBTX) *store
	mk = func(db upsertpg.DBTX) *store {
		return &store{
			tbl: &tb,
			insert: func(ctx context.Context, p profile) (bool, error) {
				return upsertpg.Insert(ctx, db, tb, p.row())
			},
			upsert: func(ctx context.Context, p profile) (out profile, created bool, err error) {
				created, err = upsertpg.Upsert(ctx, db, tb, p.row(), returning, out.dest()...)
				return
			},
			insertOrGet: func(ctx context.Context, p profile) (out profile, created bool, err error) {
				created, err = upsertpg.InsertOrGet(ctx, db, tb, p.row(), returning, out.dest()...)
				return
			},
			worker: func(t testing.TB) *store {
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

// myDB returns a *sql.DB (testkit: 100 open connections) on an isolated
// database holding the profiles table, with the driver's clientFoundRows
// option as asked.
func myDB(t testing.TB, foundRows bool) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(testkit.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientFoundRows = foundRows
	db := testkit.MySQLFor(t, cfg.FormatDSN())
	if _, err := db.ExecContext(t.Context(), myDDL); err != nil {
		t.Fatal(err)
	}
	return db
}

func openMySQL(t testing.TB, foundRows bool) *store {
	return mysqlStore(myDB(t, foundRows))
}

// mysqlStore is the upsertmysql store on pool, whose workers each take a
// connection of their own.
func mysqlStore(pool *sql.DB) *store {
	tb := tbl
	var mk func(db upsertmysql.DBTX) *store
	mk = func(db upsertmysql.DBTX) *store {
		return &store{
			tbl: &tb,
			insert: func(ctx context.Context, p profile) (bool, error) {
				return upsertmysql.Insert(ctx, db, tb, p.row())
			},
			upsert: func(ctx context.Context, p profile) (out profile, created bool, err error) {
				created, err = upsertmysql.Upsert(ctx, db, tb, p.row(), returning, out.dest()...)
				return
			},
			insertOrGet: func(ctx context.Context, p profile) (out profile, created bool, err error) {
				created, err = upsertmysql.InsertOrGet(ctx, db, tb, p.row(), returning, out.dest()...)
				return
			},
			worker: func(t testing.TB) *store {
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

func createDynamoTable(t testing.TB, client *dynamodb.Client, name string) {
	t.Helper()
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
}

func fromItem(item map[string]types.AttributeValue) (profile, error) {
	var p profile
	num := func(a string) (int64, error) {
		n, ok := item[a].(*types.AttributeValueMemberN)
		if !ok {
			return 0, fmt.Errorf("attribute %q: %T, want N", a, item[a])
		}
		return strconv.ParseInt(n.Value, 10, 64)
	}
	var err1, err2 error
	p.ID, err1 = num("id")
	p.Visits, err2 = num("visits")
	s, ok := item["name"].(*types.AttributeValueMemberS)
	if !ok {
		return p, fmt.Errorf("attribute name: %T, want S", item["name"])
	}
	p.Name = s.Value
	return p, errors.Join(err1, err2)
}

func openDynamoDB(t testing.TB) *store {
	client, prefix := testkit.DynamoDB(t)
	dt := upsert.Table{Name: prefix + "profiles", KeyColumn: "id"}
	createDynamoTable(t, client, dt.Name)
	conv := func(item map[string]types.AttributeValue, created bool, err error) (profile, bool, error) {
		if err != nil {
			return profile{}, false, err
		}
		p, err := fromItem(item)
		return p, created, err
	}
	s := &store{
		tbl: &dt,
		insert: func(ctx context.Context, p profile) (bool, error) {
			return upsertdynamo.Insert(ctx, client, dt, p.row())
		},
		upsert: func(ctx context.Context, p profile) (profile, bool, error) {
			return conv(upsertdynamo.Upsert(ctx, client, dt, p.row()))
		},
		insertOrGet: func(ctx context.Context, p profile) (profile, bool, error) {
			return conv(upsertdynamo.InsertOrGet(ctx, client, dt, p.row()))
		},
	}
	s.worker = func(testing.TB) *store { return s }
	return s
}

// TestDefaultKeyColumn: a Table without KeyColumn uses "id" on every
// backend.
func TestDefaultKeyColumn(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t)
			s.tbl.KeyColumn = ""
			first := profile{1, "ada", 1}
			if created, err := s.insert(t.Context(), first); err != nil || !created {
				t.Fatalf("insert with the default key column: created=%v err=%v; want true", created, err)
			}
			got, created, err := s.insertOrGet(t.Context(), profile{1, "bob", 2})
			if err != nil || created || got != first {
				t.Fatalf("insertOrGet = %+v created=%v err=%v; want %+v, false", got, created, err, first)
			}
		})
	}
}

func TestInsert(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s, ctx := b.open(t), t.Context()
			first := profile{1, "ada", 1}
			if created, err := s.insert(ctx, first); err != nil || !created {
				t.Fatalf("first insert: created=%v err=%v; want true", created, err)
			}
			if created, err := s.insert(ctx, profile{1, "bob", 2}); err != nil || created {
				t.Fatalf("second insert: created=%v err=%v; want false", created, err)
			}
			// The existing row is untouched.
			got, created, err := s.insertOrGet(ctx, profile{1, "cyd", 3})
			if err != nil || created || got != first {
				t.Fatalf("insertOrGet after inserts = %+v created=%v err=%v; want %+v, false", got, created, err, first)
			}
		})
	}
}

func TestUpsert(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s, ctx := b.open(t), t.Context()
			steps := []struct {
				in      profile
				created bool
			}{
				{profile{1, "ada", 1}, true},  // insert path
				{profile{1, "bob", 2}, false}, // update path: new values returned
				{profile{1, "bob", 2}, false}, // same values: MySQL's "0 rows affected" (1 with clientFoundRows)
				{profile{2, "cyd", 0}, true},  // another key
			}
			for i, st := range steps {
				got, created, err := s.upsert(ctx, st.in)
				if err != nil || created != st.created || got != st.in {
					t.Fatalf("step %d: upsert(%+v) = %+v created=%v err=%v; want %+v created=%v", i, st.in, got, created, err, st.in, st.created)
				}
			}
		})
	}
}

func TestInsertOrGet(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s, ctx := b.open(t), t.Context()
			first := profile{5, "ada", 1}
			got, created, err := s.insertOrGet(ctx, first)
			if err != nil || !created || got != first {
				t.Fatalf("first = %+v created=%v err=%v; want %+v, true", got, created, err, first)
			}
			got, created, err = s.insertOrGet(ctx, profile{5, "bob", 9})
			if err != nil || created || got != first {
				t.Fatalf("second = %+v created=%v err=%v; want %+v (existing), false", got, created, err, first)
			}
		})
	}
}

// race runs op on maxWorkers goroutines, each with its own connection,
// released together by a barrier, and returns their results.
func race(t *testing.T, s *store, op func(w *store, i int) (profile, bool, error)) ([]profile, []bool) {
	t.Helper()
	workers := make([]*store, maxWorkers)
	for i := range workers {
		workers[i] = s.worker(t)
	}
	var (
		start   = make(chan struct{})
		wg      sync.WaitGroup
		rows    = make([]profile, maxWorkers)
		created = make([]bool, maxWorkers)
		errs    = make([]error, maxWorkers)
	)
	for i, w := range workers {
		wg.Go(func() {
			<-start
			rows[i], created[i], errs[i] = op(w, i)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return rows, created
}

func count(bs []bool) (n int) {
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// TestConcurrentInsertOrGet: 64 concurrent InsertOrGet calls of one key,
// each with its own values: exactly one reports created, and all return
// the same row — the creator's.
func TestConcurrentInsertOrGet(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			rows, created := race(t, b.open(t), func(w *store, i int) (profile, bool, error) {
				return w.insertOrGet(t.Context(), profile{42, fmt.Sprintf("worker-%02d", i), int64(i)})
			})
			if n := count(created); n != 1 {
				t.Fatalf("%d callers report created; want exactly 1", n)
			}
			winner := rows[0]
			for i, c := range created {
				if c {
					winner = profile{42, fmt.Sprintf("worker-%02d", i), int64(i)}
				}
			}
			for i, r := range rows {
				if r != winner {
					t.Fatalf("caller %d got %+v; want the creator's row %+v", i, r, winner)
				}
			}
			t.Logf("%s: 1 created, %d got the existing row %+v", b.name, maxWorkers-1, winner)
		})
	}
}

// TestConcurrentInsert: 64 concurrent insert-once calls: exactly one
// creates the row.
func TestConcurrentInsert(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			_, created := race(t, b.open(t), func(w *store, i int) (profile, bool, error) {
				c, err := w.insert(t.Context(), profile{7, fmt.Sprintf("worker-%02d", i), int64(i)})
				return profile{}, c, err
			})
			if n := count(created); n != 1 {
				t.Fatalf("%d callers report created; want exactly 1", n)
			}
		})
	}
}

// TestConcurrentUpsert: 64 concurrent upserts of one key: exactly one
// creates the row, the others update it.
func TestConcurrentUpsert(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			rows, created := race(t, b.open(t), func(w *store, i int) (profile, bool, error) {
				return w.upsert(t.Context(), profile{9, fmt.Sprintf("worker-%02d", i), int64(i)})
			})
			if n := count(created); n != 1 {
				t.Fatalf("%d callers report created; want exactly 1", n)
			}
			for i, r := range rows {
				if r.ID != 9 || r.Name != fmt.Sprintf("worker-%02d", r.Visits) {
					t.Fatalf("caller %d got %+v; want a row some worker wrote", i, r)
				}
			}
		})
	}
}
