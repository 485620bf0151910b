package hotrow

import (
	"context"
	"errors"
	"fmt"

	"github.com/concurkit/concurkit"
)

var (
	// ErrInsufficient: the decrement would take the value below the
	// floor; nothing was applied for it.
	ErrInsufficient = errors.New("hotrow: insufficient")
	// ErrNotFound: no row has the key; nothing was applied.
	ErrNotFound = errors.New("hotrow: not found")
	// ErrOverflow: the update would take the value past the int64 range;
	// nothing was applied for it.
	ErrOverflow = errors.New("hotrow: value out of int64 range")
	// ErrNotApplied: the caller's context ended while its request still
	// waited for a batch; it was removed and never sent. Returned joined
	// with ctx.Err().
	ErrNotApplied = errors.New("hotrow: not applied")
	// ErrExists: Sharded.Create found shard rows of the key already;
	// nothing was inserted.
	ErrExists = errors.New("hotrow: key exists")
	// ErrClosed: the Combiner is closed.
	ErrClosed = errors.New("hotrow: combiner closed")
)

// Batch is the net change of one combined batch, for Store.TryAdd.
type Batch struct {
	// Delta is the sum of the batch's deltas.
	Delta int64
	// Low and High are the lowest and highest running sums of the batch
	// (the empty prefix, 0, included). Every update of the batch fits
	// when v + Low >= floor (if Checked) and v + Low and v + High stay in
	// the int64 range, v the row's value before the batch.
	Low, High int64
	// Checked is false when the batch has no decrement, or the Combiner
	// has no floor: then the floor does not apply.
	Checked bool
}

// NewBatch returns the Batch of deltas applied in order (checked against a
// floor when floored), or ok false when a running sum leaves the int64
// range.
func NewBatch(floored bool, deltas ...int64) (b Batch, ok bool) {
	for _, d := range deltas {
		if b.Delta, ok = add(b.Delta, d); !ok {
			return Batch{}, false
		}
		b.Low, b.High = min(b.Low, b.Delta), max(b.High, b.Delta)
		b.Checked = b.Checked || floored && d < 0
	}
	return b, true
}

// Store applies changes to one table's integer column. The adapters
// (hotrowpg, hotrowmysql) implement it; every method is one transaction of
// its own.
type Store[K comparable] interface {
	// TryAdd adds b.Delta to the value v of key in one statement,
	// provided v + b.Low >= floor (when b.Checked) and v + b.Low, v +
	// b.High are in the int64 range, and returns the new value. ok is
	// false, with nothing changed, when a check failed or the row is
	// missing: the Combiner then takes the locked path. An error whose outcome is unknown is a
	// *concurkit.AmbiguousCommitError.
	TryAdd(ctx context.Context, key K, b Batch, floor int64) (v int64, ok bool, err error)
	// Locked runs one transaction that locks key's row (FOR UPDATE),
	// reads its value v, calls plan(v) once and, when it returns a value
	// other than v, writes that value to the row, then commits. An
	// adapter may run a transaction the database rolled back (a deadlock
	// victim, a Galera certification failure) again, calling plan again
	// on the value it then reads: plan must depend on v alone. A missing
	// row is ErrNotFound (plan is not called); a commit whose outcome is
	// unknown is a *concurkit.AmbiguousCommitError.
	Locked(ctx context.Context, key K, plan func(v int64) int64) error
}

// add returns v + d, or ok false when it leaves the int64 range.
func add(v, d int64) (int64, bool) {
	s := v + d
	if (d > 0 && s < v) || (d < 0 && s > v) {
		return 0, false
	}
	return s, true
}

// fits reports whether v + d stays at or above floor, computed without
// overflow.
func fits(v, d, floor int64) bool {
	if d >= 0 {
		return true
	}
	// v + d >= floor  ⇔  v - floor >= -d; v may start below the floor.
	if v < floor {
		return false
	}
	gap := uint64(v) - uint64(floor) // v ≥ floor: exact in uint64
	return gap >= uint64(-d)         // -MinInt64 wraps to MinInt64, whose uint64 is 2^63: exact too
}

// invalid returns an error matching ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: hotrow: %s", concurkit.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// Table names the table the adapters update: a unique integer-or-text key
// column and a NOT NULL bigint value column.
type Table struct {
	// Schema optionally qualifies Name (PostgreSQL schema, MySQL
	// database). Empty: unqualified.
	Schema string
	// Name is the table name (required).
	Name string
	// KeyColumn is the unique key column; empty means "id".
	KeyColumn string
	// ValueColumn is the bigint column the updates add to; empty means
	// "v".
	ValueColumn string
	// ShardColumn is the integer shard number of a shard table (the
	// ShardStore of a Sharded counter, unique with KeyColumn); empty
	// means "shard". Other tables ignore it.
	ShardColumn string
	// VersionColumn, if set, is an integer version column that every
	// write of the value (Add, a Combiner's or a Ledger's batch)
	// increments, so that optimistic writers of the same row (an
	// optimistic.Table with this VersionColumn) see those writes as
	// conflicts: without it a compare-and-swap that read the row before a
	// batch would overwrite the batch. An Adaptive that sends hot keys to
	// a Combiner and cold ones to optimistic updates needs it. Empty: no
	// version column. Shard tables ignore it.
	VersionColumn string
}

// Columns returns t with the default column names filled in.
func (t Table) Columns() Table {
	if t.KeyColumn == "" {
		t.KeyColumn = "id"
	}
	if t.ValueColumn == "" {
		t.ValueColumn = "v"
	}
	if t.ShardColumn == "" {
		t.ShardColumn = "shard"
	}
	return t
}

// Quote returns the table's qualified name and its two columns quoted with
// quote (the adapters pass their database's identifier quoting), or an
// error matching ErrInvalidArgument.
func (t Table) Quote(quote func(parts ...string) (string, error)) (table, key, value string, err error) {
	t = t.Columns()
	if t.Name == "" {
		return "", "", "", invalid("empty table name")
	}
	parts := []string{t.Name}
	if t.Schema != "" {
		parts = []string{t.Schema, t.Name}
	}
	if table, err = quote(parts...); err != nil {
		return "", "", "", invalid("table: %v", err)
	}
	if key, err = quote(t.KeyColumn); err != nil {
		return "", "", "", invalid("key column: %v", err)
	}
	if value, err = quote(t.ValueColumn); err != nil {
		return "", "", "", invalid("value column: %v", err)
	}
	if key == value {
		return "", "", "", invalid("key and value column are both %s", key)
	}
	return table, key, value, nil
}

// QuoteVersion returns the assignment that increments the version column,
// ", <version> = <version> + 1", quoted with quote, for the adapters to
// append to their SET clauses; "" when t has no VersionColumn. An
// unquotable column, or one that is also the key or value column, is an
// error matching ErrInvalidArgument.
func (t Table) QuoteVersion(quote func(parts ...string) (string, error)) (string, error) {
	if t.VersionColumn == "" {
		return "", nil
	}
	_, key, value, err := t.Quote(quote)
	if err != nil {
		return "", err
	}
	v, err := quote(t.VersionColumn)
	if err != nil {
		return "", invalid("version column: %v", err)
	}
	if v == key || v == value {
		return "", invalid("version column %s is also the key or value column", v)
	}
	return ", " + v + " = " + v + " + 1", nil
}

// QuoteShard is Quote for a shard table: it also returns the shard column
// quoted, or an error matching ErrInvalidArgument.
func (t Table) QuoteShard(quote func(parts ...string) (string, error)) (table, key, value, shard string, err error) {
	if table, key, value, err = t.Quote(quote); err != nil {
		return "", "", "", "", err
	}
	if shard, err = quote(t.Columns().ShardColumn); err != nil {
		return "", "", "", "", invalid("shard column: %v", err)
	}
	if shard == key || shard == value {
		return "", "", "", "", invalid("shard column %s is also the key or value column", shard)
	}
	return table, key, value, shard, nil
}
