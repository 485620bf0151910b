package hotrowmysql_test

import (
	"testing"

	"github.com/concurkit/concurkit/hotrow/hotrowmysql"
	"github.com/concurkit/concurkit/hotrow/internal/hotrowtest"
)

// TestShardedExact: the shared suite's sharded stock (10,000 takes of
// 1,000), counter and edges, under both sql_modes, and with sessions whose
// default isolation is READ COMMITTED as well as REPEATABLE READ.
func TestShardedExact(t *testing.T) {
	for _, c := range []struct{ mode, iso string }{
		{"default", "READ-COMMITTED"}, {"default", "REPEATABLE-READ"}, {"SIMULTANEOUS_ASSIGNMENT", "REPEATABLE-READ"},
	} {
		t.Run(c.mode+"/"+c.iso, func(t *testing.T) {
			db := databaseParams(t, modes[c.mode], map[string]string{"tx_isolation": "'" + c.iso + "'"}, nil)
			var got string
			if err := db.QueryRowContext(t.Context(), `SELECT @@SESSION.tx_isolation`).Scan(&got); err != nil || got != c.iso {
				t.Fatalf("session isolation %q (%v), want %s", got, err, c.iso)
			}
			if _, err := db.ExecContext(t.Context(), hotrowtest.ShardTableSQL); err != nil {
				t.Fatal(err)
			}
			st, err := hotrowmysql.NewShardStore[int64](db, hotrowtest.ShardTable)
			if err != nil {
				t.Fatal(err)
			}
			hotrowtest.ShardedExact(t, st, func(t *testing.T, key int64) []int64 {
				rows, err := db.QueryContext(t.Context(), `SELECT v FROM shards WHERE id = ? ORDER BY shard`, key)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var v []int64
				for rows.Next() {
					var x int64
					if err := rows.Scan(&x); err != nil {
						t.Fatal(err)
					}
					v = append(v, x)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				return v
			})
		})
	}
}
