package redlock_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/redlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

const createAccounts = `CREATE TABLE %s (id text PRIMARY KEY, owner text NOT NULL, max_seen_token bigint NOT NULL DEFAULT 0)`

func accountsTable(t testing.TB, pool *pgxpool.Pool) fenced.Table {
	t.Helper()
	name := "accounts_" + strings.ToLower(rand.Text()[:10])
	q := pgx.Identifier{name}.Sanitize()
	if _, err := pool.Exec(t.Context(), strings.Replace(createAccounts, "%s", q, 1)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+q) })
	return fenced.Table{Name: name}
}

func owner(t testing.TB, pool *pgxpool.Pool, g fenced.Table) string {
	t.Helper()
	var o string
	if err := pool.QueryRow(t.Context(), "SELECT owner FROM "+pgx.Identifier{g.Name}.Sanitize()+" WHERE id = 'acct'").Scan(&o); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestMintAfterAcquireHazard: see the package doc. A holder paused between
// acquiring and minting would mint a token higher than its successor's and
// storage would accept its stale write; minted before acquiring (this
// package), the paused holder's token is the lower one and is rejected.
func TestMintAfterAcquireHazard(t *testing.T) {
	cs, prefix := redlockEnv(t)
	pool, src := tokenSource(t)
	l, err := redlock.New(cs, &redlock.Config{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ttl = 40 * time.Millisecond
	write := func(g fenced.Table, tok fenced.Token, who string) error {
		return fencedpg.Write(ctx, pool, g, "acct", tok, map[string]any{"owner": who})
	}

	t.Run("mint after acquire accepts the stale holder", func(t *testing.T) {
		g := accountsTable(t, pool)
		key := prefix + "after"
		// A takes a majority without a token yet (raw SET NX PX)...
		for _, c := range cs[:3] {
			if ok, err := c.SetNX(ctx, redlock.LockKey(key), "A", ttl).Result(); err != nil || !ok {
				t.Fatalf("A: SET NX = %v, %v", ok, err)
			}
		}
		// ...and is paused. B's Acquire returns once A's keys expired.
		b, err := l.Acquire(ctx, key, &distlock.Options{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release(ctx)
		if err := write(g, b.Token(), "B"); err != nil {
			t.Fatal(err)
		}
		ta, err := src.Next(ctx) // A resumes and mints only now
		if err != nil {
			t.Fatal(err)
		}
		if ta <= b.Token() {
			t.Fatalf("A's late token %v not above B's %v", ta, b.Token())
		}
		if err := write(g, ta, "A"); err != nil {
			t.Fatalf("A's stale write with the late token: %v (the hazard is that it passes)", err)
		}
		if o := owner(t, pool, g); o != "A" {
			t.Fatalf("owner %q; the hazard: A overwrites B", o)
		}
	})

	t.Run("mint before acquire rejects the stale holder", func(t *testing.T) {
		g := accountsTable(t, pool)
		key := prefix + "before"
		a, err := l.Acquire(ctx, key, &distlock.Options{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.Acquire(ctx, key, &distlock.Options{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release(ctx)
		if a.Token() >= b.Token() {
			t.Fatalf("A's token %v not below B's %v", a.Token(), b.Token())
		}
		if err := write(g, b.Token(), "B"); err != nil {
			t.Fatal(err)
		}
		if err := write(g, a.Token(), "A"); !errors.Is(err, fenced.ErrStaleToken) {
			t.Fatalf("A's stale write = %v, want ErrStaleToken", err)
		}
		if o := owner(t, pool, g); o != "B" {
			t.Fatalf("owner %q, want B", o)
		}
		if err := a.Release(ctx); !errors.Is(err, distlock.ErrLeaseLost) {
			t.Fatalf("A's Release = %v, want ErrLeaseLost", err)
		}
	})
}
