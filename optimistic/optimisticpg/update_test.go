package optimisticpg_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
)

// TestNotFoundMatchesPgxErrNoRows: code written against pgx checks
// errors.Is(err, pgx.ErrNoRows); a missing key must satisfy it, as well
// as sql.ErrNoRows and optimistic.ErrNotFound. The old ErrNotFound only
// unwrapped to sql.ErrNoRows, which pgx.ErrNoRows wraps, not the other way
// round.
func TestNotFoundMatchesPgxErrNoRows(t *testing.T) {
	t.Parallel()
	pool := pgPool(t)
	_, err := optimisticpg.Update(t.Context(), pool, optimistic.Table{Name: "inventory"}, 404, 1, nil)
	for _, target := range []error{optimistic.ErrNotFound, sql.ErrNoRows, pgx.ErrNoRows} {
		if !errors.Is(err, target) {
			t.Errorf("missing key: errors.Is(%v, %v) = false", err, target)
		}
	}
	// The other direction, as a caller's own helper might compare.
	if !errors.Is(fmt.Errorf("repo: %w", optimistic.ErrNotFound), pgx.ErrNoRows) {
		t.Error("a wrapped ErrNotFound does not match pgx.ErrNoRows")
	}
	if errors.Is(optimistic.ErrConflict, pgx.ErrNoRows) {
		t.Error("ErrConflict matches pgx.ErrNoRows")
	}
}

// fakeDB answers every CAS from memory, so that allocation counts measure
// Update itself, not pgx or the network. exists/updated choose the
// outcome.
type fakeDB struct{ updated, exists bool }

type fakeRow struct{ db *fakeDB }

func (r fakeRow) Scan(dest ...any) error {
	*dest[0].(*bool) = r.db.exists
	return nil
}

var (
	updated1 = pgconn.NewCommandTag("UPDATE 1")
	updated0 = pgconn.NewCommandTag("UPDATE 0")
)

func (db *fakeDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	if db.updated {
		return updated1, nil
	}
	return updated0, nil
}
func (*fakeDB) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, nil }
func (db *fakeDB) QueryRow(context.Context, string, ...any) pgx.Row     { return fakeRow{db} }

// maxAllocsUpdate bounds the allocations of one successful Update (one set
// column, small key and version, statement cached) with no hooks
// installed. Before the split and the statement cache, the same call
// (optimistic.UpdatePostgres with this fake) allocated 25 times (28 under
// -race): statement building and quoting on every call. With the cache it
// was 4 (the args slice, the sort buffer, the Scan targets of the
// one-statement CTE); with the plain UPDATE (no Scan on success) it is 1,
// the args slice. The bound leaves 2 for compiler and runtime changes
// while still failing loudly if per-call building, or an allocation on the
// hook path, comes back.
const maxAllocsUpdate = 3

// TestUpdateAllocs: hooks cost nothing when unused. The success path does
// not look hooks up at all; the conflict path looks them up and, finding
// none, allocates nothing more than the not-found path, which runs the same
// two statements without a hook lookup.
func TestUpdateAllocs(t *testing.T) {
	ctx := context.Background()
	tbl := optimistic.Table{Name: "counters"}
	set := map[string]any{"value": 7}
	run := func(db *fakeDB) func() {
		return func() { optimisticpg.Update(ctx, db, tbl, 1, 1, set) }
	}
	success := testing.AllocsPerRun(1000, run(&fakeDB{updated: true, exists: true}))
	conflict := testing.AllocsPerRun(1000, run(&fakeDB{exists: true}))
	notFound := testing.AllocsPerRun(1000, run(&fakeDB{}))
	t.Logf("allocations per Update: success %v, conflict %v, not found %v (before the change: 25, 28 under -race)", success, conflict, notFound)
	if success > maxAllocsUpdate {
		t.Errorf("a successful Update allocates %v times; want at most %d", success, maxAllocsUpdate)
	}
	if conflict > notFound {
		t.Errorf("a conflicting Update without hooks allocates %v times, a not-found one %v: the hook path must not allocate when no hooks are installed", conflict, notFound)
	}
	// With hooks the conflict is reported.
	var got []observe.ConflictEvent
	hctx := observe.WithHooks(ctx, &observe.Hooks{Conflict: func(_ context.Context, e observe.ConflictEvent) { got = append(got, e) }})
	if _, err := optimisticpg.Update(hctx, &fakeDB{exists: true}, tbl, 1, 1, set); !errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("conflict: %v", err)
	}
	if want := (observe.ConflictEvent{Package: "optimisticpg", Table: "counters"}); len(got) != 1 || got[0] != want {
		t.Fatalf("events %+v; want [%+v]", got, want)
	}
}
