package fencedpg_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/fenced/internal/fencedtest"
	"github.com/concurkit/concurkit/observe"
)

const (
	pgAccounts = `CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL DEFAULT '', amount bigint NOT NULL DEFAULT 0,
		max_seen_token bigint NOT NULL DEFAULT 0, version bigint NOT NULL DEFAULT 0)`
	pgFences = `CREATE TABLE concurkit_fences (resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0)`
	readRow  = "SELECT owner, amount, max_seen_token, version FROM accounts WHERE id = $1"
	casRow   = "UPDATE accounts SET amount = amount + $3, version = version + 1 WHERE id = $1 AND version = $2"
)

var accounts = fencedtest.Accounts

func set(owner string, amount int64) map[string]any { return fencedtest.Set(owner, amount) }

// dialect returns the shared suite's view of fencedpg on a fresh
// accounts table.
func dialect(t *testing.T) (fencedtest.Dialect, *pgxpool.Pool) {
	db := pgPool(t)
	if _, err := db.Exec(t.Context(), pgAccounts); err != nil {
		t.Fatal(err)
	}
	return fencedtest.Dialect{
		Name: "postgres",
		Write: func(ctx context.Context, t fenced.Table, key int64, tok fenced.Token, set map[string]any) error {
			return fencedpg.Write(ctx, db, t, key, tok, set)
		},
		Update: func(ctx context.Context, t fenced.Table, key int64, tok fenced.Token, set map[string]any) error {
			return fencedpg.Update(ctx, db, t, key, tok, set)
		},
		Exec: func(ctx context.Context, sql string) error { _, err := db.Exec(ctx, sql); return err },
		Read: func(ctx context.Context, key int64) (o string, a, tk, v int64, err error) {
			err = db.QueryRow(ctx, readRow, key).Scan(&o, &a, &tk, &v)
			return
		},
		CAS: func(ctx context.Context, key, version, delta int64) (int64, error) {
			tag, err := db.Exec(ctx, casRow, key, version, delta)
			return tag.RowsAffected(), err
		},
	}, db
}

func TestWrite(t *testing.T) {
	t.Parallel()
	d, _ := dialect(t)
	fencedtest.Write(t, d)
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	d, _ := dialect(t)
	fencedtest.Update(t, d)
}

func TestConcurrentWritersMaxTokenWins(t *testing.T) {
	t.Parallel()
	d, _ := dialect(t)
	fencedtest.ConcurrentWritersMaxTokenWins(t, d)
}

// TestVersionBump: a fenced write on a Table with VersionColumn bumps the
// version in the same statement, so a compare-and-swap with the version
// read before it fails.
func TestVersionBump(t *testing.T) {
	t.Parallel()
	d, _ := dialect(t)
	fencedtest.VersionBump(t, d)
}

func TestBadInput(t *testing.T) {
	ctx := t.Context()
	pg := pgPool(t)
	t.Run("Write", func(t *testing.T) {
		fencedtest.CheckBadInput(t, func(tb fenced.Table, tok fenced.Token, set map[string]any) error {
			return fencedpg.Write(ctx, pg, tb, 1, tok, set)
		})
	})
	t.Run("Update", func(t *testing.T) {
		fencedtest.CheckBadInput(t, func(tb fenced.Table, tok fenced.Token, set map[string]any) error {
			return fencedpg.Update(ctx, pg, tb, 1, tok, set)
		})
	})
	t.Run("bad names", func(t *testing.T) {
		if _, err := fencedpg.NewSequence(pg, ""); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("empty sequence name: %v", err)
		}
		if _, err := fencedpg.NewSequence(pg, "a", "b", "c"); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("three-part sequence name: %v", err)
		}
		if err := fencedpg.Admit(ctx, pg, fenced.Fence{}, "", 1); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("empty resource: %v", err)
		}
		if err := fencedpg.Admit(ctx, pg, fenced.Fence{Name: "a\x00"}, "r", 1); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("NUL in the fence table: %v", err)
		}
		if err := fencedpg.Admit(ctx, pg, fenced.Fence{}, "r", 0); !errors.Is(err, fenced.ErrInvalidToken) {
			t.Errorf("Admit token 0: %v", err)
		}
		if err := fencedpg.Write(ctx, pg, accounts, nil, 1, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("nil key: %v", err)
		}
	})
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgPool(t)
	if _, err := db.Exec(ctx, pgFences+`; CREATE TABLE fences (resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := db.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	for _, f := range []fenced.Fence{{}, {Schema: schema, Name: "fences"}} {
		t.Run(f.Table().Name, func(t *testing.T) {
			fencedtest.AdmitSequence(t, func(tok fenced.Token, commit bool) error {
				return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
					if err := fencedpg.Admit(ctx, tx, f, "mailer", tok); err != nil {
						return err
					}
					if !commit {
						return fencedtest.ErrRollback
					}
					return nil
				})
			})
		})
	}
}

func TestSequence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg := pgPool(t)
	if err := fencedpg.CreateSequence(ctx, pg); err != nil {
		t.Fatal(err)
	}
	if err := fencedpg.CreateSequence(ctx, pg); err != nil { // idempotent
		t.Fatal(err)
	}
	src, err := fencedpg.NewSequence(pg)
	if err != nil {
		t.Fatal(err)
	}
	fencedtest.Source(t, src)
	t.Run("missing sequence", func(t *testing.T) {
		s, _ := fencedpg.NewSequence(pg, "nope")
		if _, err := s.Next(ctx); err == nil {
			t.Fatal("nextval on a missing sequence succeeded")
		}
	})
}

// TestNotFoundMatchesNoRows: Update's not-found error matches
// fenced.ErrNotFound, sql.ErrNoRows and the real pgx.ErrNoRows, and the
// sentinels stay apart from other errors.
func TestNotFoundMatchesNoRows(t *testing.T) {
	d, _ := dialect(t)
	err := d.Update(t.Context(), accounts, 404, 1, nil)
	for _, target := range []error{fenced.ErrNotFound, sql.ErrNoRows, pgx.ErrNoRows} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(%v, %v) = false", err, target)
		}
	}
	if errors.Is(err, fenced.ErrStaleToken) || errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("%v matches an unrelated sentinel", err)
	}
	if got := observe.ErrorType(err); got != "not_found" {
		t.Errorf("observe.ErrorType = %q, want not_found", got)
	}
	if errors.Is(errors.New("other"), fenced.ErrNotFound) || errors.Is(fenced.ErrStaleToken, pgx.ErrNoRows) {
		t.Error("unrelated errors match")
	}
}

// TestHooks: every refusal is reported to FenceRejected (Package fencedpg,
// Resource the table or the fence resource, Seen when the adapter read it),
// and accepted writes report nothing.
func TestHooks(t *testing.T) {
	t.Parallel()
	_, db := dialect(t)
	if _, err := db.Exec(t.Context(), pgFences); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := db.QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	ctx, events := fencedtest.Rejections(t.Context())
	for _, err := range []error{
		fencedpg.Write(ctx, db, accounts, 1, 9, set("a", 1)),
		fencedpg.Update(ctx, db, accounts, 1, 9, set("b", 2)),
		fencedpg.Admit(ctx, db, fenced.Fence{}, "mailer", 9),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if ev := events(); len(ev) != 0 {
		t.Fatalf("accepted writes reported %v", ev)
	}
	for _, err := range []error{
		fencedpg.Write(ctx, db, accounts, 1, 7, set("stale", 1)),
		fencedpg.Update(ctx, db, accounts, 1, 8, set("stale", 1)),
		fencedpg.Admit(ctx, db, fenced.Fence{}, "mailer", 3),
		fencedpg.Write(ctx, db, fenced.Table{Schema: schema, Name: "accounts"}, 1, 2, nil),
	} {
		if !errors.Is(err, fenced.ErrStaleToken) || observe.ErrorType(err) != "stale_token" {
			t.Fatalf("stale write = %v (type %q)", err, observe.ErrorType(err))
		}
	}
	want := []observe.FenceEvent{
		{Package: "fencedpg", Resource: "accounts", Token: 7}, // the upsert cannot tell what it saw
		{Package: "fencedpg", Resource: "accounts", Token: 8, Seen: 9},
		{Package: "fencedpg", Resource: "mailer", Token: 3},
		{Package: "fencedpg", Resource: schema + ".accounts", Token: 2},
	}
	if got := events(); len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
			}
		}
	}
}

// TestCancelled: a call whose context has ended returns an error matching
// ctx.Err(), and writes nothing.
func TestCancelled(t *testing.T) {
	t.Parallel()
	d, db := dialect(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for name, err := range map[string]error{
		"Write":  fencedpg.Write(ctx, db, accounts, 1, 1, set("x", 1)),
		"Update": fencedpg.Update(ctx, db, accounts, 1, 1, set("x", 1)),
		"Admit":  fencedpg.Admit(ctx, db, fenced.Fence{}, "r", 1),
	} {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s = %v, want context.Canceled", name, err)
		}
	}
	if _, _, _, _, err := d.Read(t.Context(), 1); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("a cancelled write left a row (%v)", err)
	}
}
