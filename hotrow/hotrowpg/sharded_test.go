package hotrowpg_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/hotrow/hotrowpg"
	"github.com/concurkit/concurkit/hotrow/internal/hotrowtest"
	"github.com/concurkit/concurkit/testkit"
)

// TestShardedExact: the shared suite's sharded stock (10,000 takes of
// 1,000), counter and edges, on the default pool and on a pool whose
// sessions default to REPEATABLE READ (the locked path runs READ
// COMMITTED: under REPEATABLE READ its FOR UPDATE would fail on every
// shard a concurrent Take changed).
func TestShardedExact(t *testing.T) {
	for _, iso := range []string{"read committed", "repeatable read"} {
		t.Run(iso, func(t *testing.T) {
			_, u := poolURL(t, nil)
			p := testkit.PostgresPoolFor(t, u+"&default_transaction_isolation="+strings.ReplaceAll(iso, " ", "%20"))
			var got string
			if err := p.QueryRow(t.Context(), `SHOW default_transaction_isolation`).Scan(&got); err != nil || got != iso {
				t.Fatalf("default_transaction_isolation %q (%v), want %q", got, err, iso)
			}
			if _, err := p.Exec(t.Context(), hotrowtest.ShardTableSQL); err != nil {
				t.Fatal(err)
			}
			st, err := hotrowpg.NewShardStore[int64](p, hotrowtest.ShardTable)
			if err != nil {
				t.Fatal(err)
			}
			hotrowtest.ShardedExact(t, st, func(t *testing.T, key int64) []int64 {
				rows, _ := p.Query(t.Context(), `SELECT v FROM shards WHERE id = $1 ORDER BY shard`, key)
				v, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				if err != nil {
					t.Fatal(err)
				}
				return v
			})
		})
	}
}

// TestShardedAnswerLost: a Take and an Add reach the server but their
// answers are held until the callers give up: each is told the outcome is
// unknown (an AmbiguousCommitError matching its context's error), never
// "not applied", and the counter holds its start plus a subset of the
// two (pgx's cancel request may still stop a statement the server holds).
func TestShardedAnswerLost(t *testing.T) {
	_, schemaURL := poolURL(t, nil)
	u, err := url.Parse(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	p := testkit.PostgresPoolFor(t, schemaURL)
	if _, err := p.Exec(t.Context(), hotrowtest.ShardTableSQL); err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartProxy(t, u.Host)
	u.Host = proxy.Addr
	st, err := hotrowpg.NewShardStore[int64](testkit.PostgresPoolFor(t, u.String()), hotrowtest.ShardTable)
	if err != nil {
		t.Fatal(err)
	}
	c, err := hotrow.NewSharded[int64](st, &hotrow.ShardedOptions{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), 1, 10); err != nil {
		t.Fatal(err)
	}
	proxy.FreezeReplies()
	for name, op := range map[string]func(ctx context.Context) error{
		"Take(3)": func(ctx context.Context) error { return c.Take(ctx, 1, 3) },
		"Add(5)":  func(ctx context.Context) error { return c.Add(ctx, 1, 5) },
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		err := op(ctx)
		cancel()
		var amb *concurkit.AmbiguousCommitError
		if !errors.As(err, &amb) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with its answer held: %v, want an AmbiguousCommitError matching DeadlineExceeded", name, err)
		}
	}
	proxy.Thaw()
	var v int64
	if err := p.QueryRow(t.Context(), `SELECT sum(v) FROM shards WHERE id = 1`).Scan(&v); err != nil || (v != 10 && v != 7 && v != 15 && v != 12) {
		t.Errorf("counter %d (%v), want 10 plus a subset of -3 and +5", v, err)
	}
	t.Logf("counter after the unknown outcomes: %d", v)
}
