package optimisticmysql_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
)

// fakeDB answers every CAS with one affected row from memory, so that
// allocation counts measure Update itself, not the driver or the network.
// (A miss needs a *sql.Row, which only a driver can make: the conflict
// path is tested against MariaDB, and its hook emission is
// allocation-free without hooks, see optimistic/internal/cas.)
type fakeDB struct{}

type oneRow struct{}

func (oneRow) LastInsertId() (int64, error) { return 0, nil }
func (oneRow) RowsAffected() (int64, error) { return 1, nil }

func (fakeDB) ExecContext(context.Context, string, ...any) (sql.Result, error) { return oneRow{}, nil }
func (fakeDB) QueryContext(context.Context, string, ...any) (*sql.Rows, error) { return nil, nil }
func (fakeDB) QueryRowContext(context.Context, string, ...any) *sql.Row        { return nil }

// maxAllocsUpdate bounds the allocations of one successful Update (one set
// column, small key and version, statements cached, a handle that is not a
// *sql.DB, so no KILL QUERY watcher) with no hooks installed. Before the
// split and the statement cache the same call (optimistic.UpdateMySQL with
// this fake) allocated 24 times (26 under -race). Now it is 1 (the args
// slice); the bound leaves 2 for compiler and runtime changes.
const maxAllocsUpdate = 3

func TestUpdateAllocs(t *testing.T) {
	ctx := context.Background()
	tbl := optimistic.Table{Name: "counters"}
	set := map[string]any{"value": 7}
	n := testing.AllocsPerRun(1000, func() {
		if _, err := optimisticmysql.Update(ctx, fakeDB{}, tbl, 1, 1, set); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations per successful Update: %v (before the change: 24, 26 under -race)", n)
	if n > maxAllocsUpdate {
		t.Errorf("a successful Update allocates %v times; want at most %d", n, maxAllocsUpdate)
	}
}
