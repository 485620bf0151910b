package redislock_test

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
	"github.com/concurkit/concurkit/distlock/redislock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

const createAccounts = `CREATE TABLE %s (id text PRIMARY KEY, owner text NOT NULL, max_seen_token bigint NOT NULL DEFAULT 0)`

// accountsTable creates a fenced table and returns its guard.
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

// TestMintAfterAcquireHazard shows why this package mints the fencing
// token BEFORE taking the lock.
//
// Holder A takes the lock, is paused past its TTL, and B takes the lock
// and writes. Then A resumes and writes.
//   - Minting after acquiring (simulated with a raw SET NX PX): A mints
//     only when it resumes, so its token is HIGHER than B's and storage
//     accepts A's stale write: B's data is lost although fencing is on.
//   - Minting before acquiring (this package): A's token was minted before
//     B's, so it is lower; storage rejects A and B's data stays.
func TestMintAfterAcquireHazard(t *testing.T) {
	c, prefix := redisEnv(t)
	pool, src := tokenSource(t)
	l, err := redislock.New(c, &redislock.Config{Source: src})
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
		// A acquires without a token yet...
		if ok, err := c.SetNX(ctx, redislock.LockKey(key), "A", ttl).Result(); err != nil || !ok {
			t.Fatalf("A: SET NX = %v, %v", ok, err)
		}
		// ...and is paused here. B's Acquire returns once A's key expired.
		b, err := l.Acquire(ctx, key, &distlock.Options{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release(ctx)
		if err := write(g, b.Token(), "B"); err != nil {
			t.Fatal(err)
		}
		// A resumes and only now mints its token: higher than B's.
		ta, err := src.Next(ctx)
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
		// A is paused; B's Acquire returns once A's key expired.
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
		// B keeps writing with its token (equal passes).
		if err := write(g, b.Token(), "B2"); err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx); !errors.Is(err, distlock.ErrLeaseLost) {
			t.Fatalf("A's Release = %v, want ErrLeaseLost", err)
		}
	})

	// Whatever the interleaving of minting and acquiring, the holder that
	// is rejected is the one with the lower token: never the newer one.
	t.Run("lower token rejected, never the reverse", func(t *testing.T) {
		g := accountsTable(t, pool)
		t1, _ := src.Next(ctx)
		t2, _ := src.Next(ctx)
		if err := write(g, t2, "newer"); err != nil {
			t.Fatal(err)
		}
		if err := write(g, t1, "older"); !errors.Is(err, fenced.ErrStaleToken) {
			t.Fatalf("older token after newer = %v, want ErrStaleToken", err)
		}
		g2 := accountsTable(t, pool)
		if err := write(g2, t1, "older"); err != nil {
			t.Fatal(err)
		}
		if err := write(g2, t2, "newer"); err != nil {
			t.Fatalf("newer token after older = %v, want nil", err)
		}
		// And the lock refuses the older token once the newer one acquired.
		key := prefix + "order"
		if res, err := l.AttemptWithToken(ctx, key, time.Second, t2); err != nil || res != 1 {
			t.Fatalf("newer token attempt = %d, %v", res, err)
		}
		if err := c.Del(ctx, redislock.LockKey(key)).Err(); err != nil {
			t.Fatal(err)
		}
		if res, err := l.AttemptWithToken(ctx, key, time.Second, t1); err != nil || res != -1 {
			t.Fatalf("older token on a free lock = %d, %v; want -1 (stale)", res, err)
		}
	})
}

// TestKleppmannNegativeControl: the same pause without the fence (a plain
// UPDATE) lets the paused holder overwrite its successor.
func TestKleppmannNegativeControl(t *testing.T) {
	c, prefix := redisEnv(t)
	pool, src := tokenSource(t)
	l, err := redislock.New(c, &redislock.Config{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	g := accountsTable(t, pool)
	key := prefix + "k"
	a, err := l.Acquire(ctx, key, &distlock.Options{TTL: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, key, &distlock.Options{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	plain := `INSERT INTO ` + pgx.Identifier{g.Name}.Sanitize() + ` (id, owner) VALUES ('acct', $1) ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner`
	if _, err := pool.Exec(ctx, plain, "B"); err != nil {
		t.Fatal(err)
	}
	if a.Context().Err() == nil {
		t.Fatal("A's lease context not cancelled after its validity")
	}
	if _, err := pool.Exec(ctx, plain, "A"); err != nil { // the paused A ignores its context
		t.Fatal(err)
	}
	if o := owner(t, pool, g); o != "A" {
		t.Fatalf("owner %q: without fencing A's late write should overwrite B", o)
	}
}
