package optimisticpg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
)

// counting is a DBTX that counts the statements sent through it.
type counting struct {
	optimisticpg.DBTX
	n int
}

func (c *counting) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.n++
	return c.DBTX.Exec(ctx, sql, args...)
}

func (c *counting) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.n++
	return c.DBTX.Query(ctx, sql, args...)
}

func (c *counting) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n++
	return c.DBTX.QueryRow(ctx, sql, args...)
}

// TestRoundTrips: what the package docs promise (optimistic's and this
// one's): a successful compare-and-swap is one statement; a miss costs a
// second one, which tells a conflict from a missing row.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	pool := pgPool(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'sku-1', 5)"); err != nil {
		t.Fatal(err)
	}
	tbl := optimistic.Table{Name: "inventory"}
	for _, tc := range []struct {
		name    string
		key     int64
		version int64
		err     error
		want    int
	}{{"success", 1, 1, nil, 1}, {"conflict", 1, 1, optimistic.ErrConflict, 2}, {"not found", 404, 1, optimistic.ErrNotFound, 2}} {
		db := &counting{DBTX: pool}
		_, err := optimisticpg.Update(ctx, db, tbl, tc.key, tc.version, map[string]any{"stock": 4})
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if db.n != tc.want {
			t.Errorf("%s: %d statements, want %d", tc.name, db.n, tc.want)
		}
	}
}
