package fenced_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/fenced"
)

// dialect runs the same guarded-write checks against PostgreSQL and MariaDB.
type dialect struct {
	name   string
	write  func(ctx context.Context, g fenced.Guard, key int64, tok fenced.Token, set ...fenced.Set) error
	update func(ctx context.Context, g fenced.Guard, key int64, tok fenced.Token, set ...fenced.Set) error
	exec   func(ctx context.Context, sql string) error
	read   func(ctx context.Context, key int64) (owner string, amount, tok int64, err error)
}

const (
	pgAccounts = `CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL DEFAULT '', amount bigint NOT NULL DEFAULT 0, max_seen_token bigint NOT NULL DEFAULT 0)`
	myAccounts = "CREATE TABLE accounts (id BIGINT PRIMARY KEY, owner VARCHAR(64) NOT NULL DEFAULT '', amount BIGINT NOT NULL DEFAULT 0, max_seen_token BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"
	readRow    = "SELECT owner, amount, max_seen_token FROM accounts WHERE id = "
)

func postgresDialect(t *testing.T) dialect {
	db := pgPool(t)
	return pgDialect(db)
}

func pgDialect(db *pgxpool.Pool) dialect {
	return dialect{
		name: "postgres",
		write: func(ctx context.Context, g fenced.Guard, key int64, tok fenced.Token, set ...fenced.Set) error {
			return fenced.WritePostgres(ctx, db, g, key, tok, set...)
		},
		update: func(ctx context.Context, g fenced.Guard, key int64, tok fenced.Token, set ...fenced.Set) error {
			return fenced.UpdatePostgres(ctx, db, g, key, tok, set...)
		},
		exec: func(ctx context.Context, sql string) error { _, err := db.Exec(ctx, sql); return err },
		read: func(ctx context.Context, key int64) (o string, a, tk int64, err error) {
			err = db.QueryRow(ctx, readRow+"$1", key).Scan(&o, &a, &tk)
			return
		},
	}
}

func mysqlDialect(t *testing.T) dialect {
	db := myDB(t)
	return dialect{
		name: "mariadb",
		write: func(ctx context.Context, g fenced.Guard, key int64, tok fenced.Token, set ...fenced.Set) error {
			return fenced.WriteMySQL(ctx, db, g, key, tok, set...)
		},
		update: func(ctx context.Context, g fenced.Guard, key int64, tok fenced.Token, set ...fenced.Set) error {
			return fenced.UpdateMySQL(ctx, db, g, key, tok, set...)
		},
		exec: func(ctx context.Context, sql string) error { _, err := db.ExecContext(ctx, sql); return err },
		read: func(ctx context.Context, key int64) (o string, a, tk int64, err error) {
			err = db.QueryRowContext(ctx, readRow+"?", key).Scan(&o, &a, &tk)
			return
		},
	}
}

func dialects(t *testing.T, fn func(t *testing.T, d dialect, ddl string)) {
	t.Run("postgres", func(t *testing.T) { t.Parallel(); fn(t, postgresDialect(t), pgAccounts) })
	t.Run("mariadb", func(t *testing.T) { t.Parallel(); fn(t, mysqlDialect(t), myAccounts) })
}

var accounts = fenced.Guard{Table: "accounts"}

func set(owner string, amount int64) []fenced.Set {
	return []fenced.Set{{Column: "owner", Value: owner}, {Column: "amount", Value: amount}}
}

func TestGuardedWrite(t *testing.T) {
	dialects(t, func(t *testing.T, d dialect, ddl string) {
		ctx := t.Context()
		if err := d.exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			name   string
			tok    fenced.Token
			owner  string
			want   error
			wantOw string // row after the step
			wantTk int64
		}{
			{"new row", 5, "a", nil, "a", 5},
			{"equal token passes", 5, "a2", nil, "a2", 5},
			{"equal token, identical values", 5, "a2", nil, "a2", 5},
			{"higher token passes", 9, "b", nil, "b", 9},
			{"lower token is stale", 7, "stale", fenced.ErrStaleToken, "b", 9},
			{"much lower token is stale", 1, "stale", fenced.ErrStaleToken, "b", 9},
			{"equal token after a stale one", 9, "b2", nil, "b2", 9},
		}
		for _, s := range steps {
			err := d.write(ctx, accounts, 1, s.tok, set(s.owner, int64(s.tok))...)
			if !errors.Is(err, s.want) || (s.want == nil && err != nil) {
				t.Fatalf("%s: write = %v, want %v", s.name, err, s.want)
			}
			owner, _, tok, err := d.read(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if owner != s.wantOw || tok != s.wantTk {
				t.Fatalf("%s: row = (%q, %d), want (%q, %d)", s.name, owner, tok, s.wantOw, s.wantTk)
			}
		}
		// A write with no columns only advances the token.
		if err := d.write(ctx, accounts, 1, 12); err != nil {
			t.Fatal(err)
		}
		if owner, _, tok, _ := d.read(ctx, 1); owner != "b2" || tok != 12 {
			t.Fatalf("token-only write: row = (%q, %d)", owner, tok)
		}
	})
}

func TestGuardedUpdate(t *testing.T) {
	dialects(t, func(t *testing.T, d dialect, ddl string) {
		ctx := t.Context()
		if err := d.exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
		if err := d.update(ctx, accounts, 1, 3, set("x", 1)...); !errors.Is(err, fenced.ErrNotFound) {
			t.Fatalf("update of a missing row = %v", err)
		}
		// An existing row from before fencing: token column default 0.
		if err := d.exec(ctx, "INSERT INTO accounts (id, owner) VALUES (1, 'legacy')"); err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct {
			tok  fenced.Token
			want error
		}{{3, nil}, {3, nil}, {2, fenced.ErrStaleToken}, {4, nil}} {
			if err := d.update(ctx, accounts, 1, s.tok, set("o", 1)...); !errors.Is(err, s.want) || (s.want == nil && err != nil) {
				t.Fatalf("update token %d = %v, want %v", s.tok, err, s.want)
			}
		}
		if owner, _, tok, _ := d.read(ctx, 1); owner != "o" || tok != 4 {
			t.Fatalf("row = (%q, %d)", owner, tok)
		}
	})
}

// TestConcurrentWritersMaxTokenWins: many writers with random tokens race
// on one row; whatever the interleaving, the row ends with the data of the
// highest token, and every writer whose token is the max was accepted.
func TestConcurrentWritersMaxTokenWins(t *testing.T) {
	dialects(t, func(t *testing.T, d dialect, ddl string) {
		ctx := t.Context()
		if err := d.exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
		const writers = 24
		for round := range 3 {
			key := int64(round + 1)
			tokens := rand.Perm(1000)[:writers]
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, writers)
			for i, tk := range tokens {
				wg.Go(func() {
					<-start
					tok := fenced.Token(tk + 1)
					errs[i] = d.write(ctx, accounts, key, tok, set(fmt.Sprint("w", tok), int64(tok))...)
				})
			}
			close(start)
			wg.Wait()
			maxTok := int64(slices.Max(tokens) + 1)
			for i, err := range errs {
				if err != nil && !errors.Is(err, fenced.ErrStaleToken) {
					t.Fatalf("writer %d: %v", i, err)
				}
				if int64(tokens[i]+1) == maxTok && err != nil {
					t.Fatalf("the max-token writer was rejected: %v", err)
				}
			}
			owner, amount, tok, err := d.read(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if tok != maxTok || amount != maxTok || owner != fmt.Sprint("w", maxTok) {
				t.Fatalf("round %d: row = (%q, %d, %d), want the max token %d's data", round, owner, amount, tok, maxTok)
			}
		}
	})
}

func TestBadInput(t *testing.T) {
	ctx := t.Context()
	pg := pgPool(t)
	my := myDB(t)
	cases := []struct {
		name string
		g    fenced.Guard
		tok  fenced.Token
		set  []fenced.Set
		want error
	}{
		{"zero token", accounts, 0, nil, fenced.ErrInvalidToken},
		{"negative token", accounts, -5, nil, fenced.ErrInvalidToken},
		{"empty table", fenced.Guard{}, 1, nil, fenced.ErrInvalidGuard},
		{"NUL in table", fenced.Guard{Table: "a\x00b"}, 1, nil, fenced.ErrInvalidGuard},
		{"too long column", accounts, 1, []fenced.Set{{Column: string(make([]byte, 70)), Value: 1}}, fenced.ErrInvalidGuard},
		{"empty column", accounts, 1, []fenced.Set{{Column: "", Value: 1}}, fenced.ErrInvalidGuard},
		{"set the token column", accounts, 1, []fenced.Set{{Column: "max_seen_token", Value: 1}}, fenced.ErrInvalidGuard},
		{"set the key column", accounts, 1, []fenced.Set{{Column: "id", Value: 1}}, fenced.ErrInvalidGuard},
		{"duplicate column", accounts, 1, []fenced.Set{{Column: "a", Value: 1}, {Column: "a", Value: 2}}, fenced.ErrInvalidGuard},
		{"key equals token column", fenced.Guard{Table: "t", KeyColumn: "k", TokenColumn: "k"}, 1, nil, fenced.ErrInvalidGuard},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for name, err := range map[string]error{
				"WritePostgres":  fenced.WritePostgres(ctx, pg, c.g, 1, c.tok, c.set...),
				"UpdatePostgres": fenced.UpdatePostgres(ctx, pg, c.g, 1, c.tok, c.set...),
				"WriteMySQL":     fenced.WriteMySQL(ctx, my, c.g, 1, c.tok, c.set...),
				"UpdateMySQL":    fenced.UpdateMySQL(ctx, my, c.g, 1, c.tok, c.set...),
			} {
				if !errors.Is(err, c.want) {
					t.Errorf("%s = %v, want %v", name, err, c.want)
				}
			}
		})
	}
	t.Run("bad names", func(t *testing.T) {
		if _, err := fenced.NewPostgresSequence(pg, ""); !errors.Is(err, fenced.ErrInvalidGuard) {
			t.Errorf("empty sequence name: %v", err)
		}
		if _, err := fenced.NewMySQLSequence(my, "a", "b", "c"); !errors.Is(err, fenced.ErrInvalidGuard) {
			t.Errorf("three-part sequence name: %v", err)
		}
		if err := fenced.Admit(ctx, pg, "", 1); !errors.Is(err, fenced.ErrInvalidGuard) {
			t.Errorf("empty resource: %v", err)
		}
	})
}

const (
	pgFences = `CREATE TABLE concurkit_fences (resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0)`
	myFences = "CREATE TABLE concurkit_fences (resource VARCHAR(255) PRIMARY KEY, max_seen_token BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"
)

func TestAdmitPostgres(t *testing.T) {
	ctx := t.Context()
	db := pgPool(t)
	if _, err := db.Exec(ctx, pgFences); err != nil {
		t.Fatal(err)
	}
	admit := func(tok fenced.Token, commit bool) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if err := fenced.Admit(ctx, tx, "mailer", tok); err != nil {
				return err
			}
			if !commit {
				return errRollback
			}
			return nil
		})
	}
	checkAdmitSequence(t, admit)
}

func TestAdmitMySQL(t *testing.T) {
	ctx := t.Context()
	db := myDB(t)
	if _, err := db.ExecContext(ctx, myFences); err != nil {
		t.Fatal(err)
	}
	admit := func(tok fenced.Token, commit bool) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := fenced.AdmitMySQL(ctx, tx, "mailer", tok); err != nil {
			return err
		}
		if !commit {
			return errRollback
		}
		return tx.Commit()
	}
	checkAdmitSequence(t, admit)
}

var errRollback = errors.New("rollback")

func checkAdmitSequence(t *testing.T, admit func(fenced.Token, bool) error) {
	t.Helper()
	steps := []struct {
		tok    fenced.Token
		commit bool
		want   error
	}{
		{5, true, nil},
		{5, true, nil},                  // equal passes
		{4, true, fenced.ErrStaleToken}, // lower fails
		{20, false, errRollback},        // admitted, then rolled back: not recorded
		{15, true, nil},                 // so 15 still passes
		{14, true, fenced.ErrStaleToken},
	}
	for i, s := range steps {
		if err := admit(s.tok, s.commit); !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Fatalf("step %d (token %d): %v, want %v", i, s.tok, err, s.want)
		}
	}
}

func TestSequenceSources(t *testing.T) {
	ctx := t.Context()
	pg := pgPool(t)
	my := myDB(t)
	if err := fenced.CreatePostgresSequence(ctx, pg); err != nil {
		t.Fatal(err)
	}
	if err := fenced.CreatePostgresSequence(ctx, pg); err != nil { // idempotent
		t.Fatal(err)
	}
	if err := fenced.CreateMySQLSequence(ctx, my, "tokens"); err != nil {
		t.Fatal(err)
	}
	pgSrc, err := fenced.NewPostgresSequence(pg)
	if err != nil {
		t.Fatal(err)
	}
	mySrc, err := fenced.NewMySQLSequence(my, "tokens")
	if err != nil {
		t.Fatal(err)
	}
	client, prefix := ddb(t)
	table := prefix + "counters"
	createCounterTable(t, client, table)
	ddbSrc, err := fenced.NewDynamoDBCounter(client, table, "lock-tokens", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]fenced.Source{"postgres": pgSrc, "mariadb": mySrc, "dynamodb": ddbSrc} {
		t.Run(name, func(t *testing.T) { checkSource(t, src) })
	}
	t.Run("missing sequence", func(t *testing.T) {
		s, _ := fenced.NewPostgresSequence(pg, "nope")
		if _, err := s.Next(ctx); err == nil {
			t.Fatal("nextval on a missing sequence succeeded")
		}
	})
}

// checkSource draws tokens from 8 goroutines: all distinct, positive, and
// increasing within each goroutine (each call starts after the previous
// one returned).
func checkSource(t *testing.T, src fenced.Source) {
	t.Helper()
	const workers, per = 8, 40
	got := make([][]fenced.Token, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range per {
				tok, err := src.Next(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], tok)
			}
		})
	}
	wg.Wait()
	seen := map[fenced.Token]bool{}
	for _, toks := range got {
		if len(toks) != per {
			t.Fatalf("got %d tokens, want %d", len(toks), per)
		}
		for i, tok := range toks {
			if !tok.Valid() || seen[tok] || (i > 0 && tok <= toks[i-1]) {
				t.Fatalf("bad token sequence %v", toks)
			}
			seen[tok] = true
		}
	}
}

// sqlNullable keeps database/sql imported for the MySQL adapter.
var _ = sql.ErrNoRows
