package hotrowtest

import (
	"context"
	"errors"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/hotrow"
	"github.com/concurkit/concurkit/optimistic"
)

// Versioned is what VersionColumn needs of an adapter, on table "stock"
// (id, v, version) holding rows 1 and 2 at v 100, version 1.
type Versioned struct {
	// Add is the adapter's escrow Add on t.
	Add func(ctx context.Context, t hotrow.Table, key, delta int64) error
	// Store and Ledger return the adapter's stores of t.
	Store  func(t hotrow.Table) (hotrow.Store[int64], error)
	Ledger func(t hotrow.Table) (hotrow.LedgerStore[int64], error)
	// Row reads the row of key.
	Row func(t *testing.T, key int64) (v, version int64)
	// CAS is the adapter's optimistic update of v, expecting version.
	CAS func(ctx context.Context, key, version, v int64) error
}

// VersionColumn: with Table.VersionColumn every write of the value — Add,
// a Combiner's batch and its locked path, a Ledger's batch — increments
// the version, so a compare-and-swap that read the row before it
// conflicts; a locked path that changes nothing leaves it alone. Without
// the column the same compare-and-swap succeeds and the Add is lost: the
// negative control, the anomaly the column prevents.
func VersionColumn(t *testing.T, x Versioned) {
	ctx := t.Context()
	tbl := hotrow.Table{Name: "stock", VersionColumn: "version"}
	want := func(step string, key, v, version int64) {
		t.Helper()
		if gv, gver := x.Row(t, key); gv != v || gver != version {
			t.Fatalf("%s: row %d is (v %d, version %d); want (%d, %d)", step, key, gv, gver, v, version)
		}
	}
	if err := x.Add(ctx, tbl, 1, -5); err != nil {
		t.Fatal(err)
	}
	want("Add", 1, 95, 2)

	st, err := x.Store(tbl)
	if err != nil {
		t.Fatal(err)
	}
	c, err := hotrow.NewCombiner(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, 1, 3); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want("Combiner batch", 1, 98, 3)
	if err := st.Locked(ctx, 1, func(v int64) int64 { return v + 2 }); err != nil {
		t.Fatal(err)
	}
	want("locked path", 1, 100, 4)
	if err := st.Locked(ctx, 1, func(v int64) int64 { return v }); err != nil {
		t.Fatal(err)
	}
	want("locked path without a change", 1, 100, 4)

	ls, err := x.Ledger(tbl)
	if err != nil {
		t.Fatal(err)
	}
	l, err := hotrow.NewLedger(ls, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Transfer(ctx, hotrow.Transfer[int64]{From: 1, To: 2, Amount: 10}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want("Ledger batch, from", 1, 90, 5)
	want("Ledger batch, to", 2, 110, 2)

	// A compare-and-swap that read the row before an Add conflicts.
	v, ver := x.Row(t, 1)
	if err := x.Add(ctx, tbl, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := x.CAS(ctx, 1, ver, v+1); !errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("CAS after a versioned Add: %v; want optimistic.ErrConflict", err)
	}
	want("CAS refused", 1, 91, 6)

	// Negative control: without the column it does not, and the Add is lost.
	v, ver = x.Row(t, 1)
	if err := x.Add(ctx, hotrow.Table{Name: "stock"}, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := x.CAS(ctx, 1, ver, v+1); err != nil {
		t.Fatalf("CAS after an unversioned Add: %v; want it to succeed (and lose the Add)", err)
	}
	want("unversioned Add lost", 1, 92, 7)

	for _, col := range []string{"v", "id"} {
		err := x.Add(ctx, hotrow.Table{Name: "stock", VersionColumn: col}, 1, 1)
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("VersionColumn %q: %v; want ErrInvalidArgument", col, err)
		}
	}
}
