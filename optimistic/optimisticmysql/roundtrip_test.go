package optimisticmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
)

// counting is a DBTX that counts the statements sent through it.
type counting struct {
	optimisticmysql.DBTX
	n int
}

func (c *counting) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	c.n++
	return c.DBTX.ExecContext(ctx, q, args...)
}

func (c *counting) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	c.n++
	return c.DBTX.QueryContext(ctx, q, args...)
}

func (c *counting) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	c.n++
	return c.DBTX.QueryRowContext(ctx, q, args...)
}

// TestRoundTrips: what the package docs promise (optimistic's and this
// one's): a successful compare-and-swap is one statement; a miss costs a
// second one, which tells a conflict from a missing row.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	db := myDB(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO inventory (id, sku, stock) VALUES (1, 'sku-1', 5)"); err != nil {
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
		c := &counting{DBTX: db}
		_, err := optimisticmysql.Update(ctx, c, tbl, tc.key, tc.version, map[string]any{"stock": 4})
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.n != tc.want {
			t.Errorf("%s: %d statements, want %d", tc.name, c.n, tc.want)
		}
	}
}
