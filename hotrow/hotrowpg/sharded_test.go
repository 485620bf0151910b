package hotrowpg_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

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
