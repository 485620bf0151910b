package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// Every workload table has the same shape:
//
//	id BIGINT PRIMARY KEY, v BIGINT, w BIGINT, version BIGINT, max_seen_token BIGINT
//
// v is the value (counter, stock, balance), w a second value (units sold),
// version the optimistic strategies' version column and max_seen_token the
// fenced strategies' token column.
const (
	tableCounters  = "counters"
	tableInventory = "inventory"
	tableAccounts  = "accounts"
)

// benchTables are the tables the benchmark creates in its schema, with the
// token sequence of the redis strategy and the sync probe's table.
var benchTables = []string{tableCounters, tableInventory, tableAccounts, tableSyncProbe}

const (
	tableSyncProbe = "sync_probe"
	tokenSequence  = "lock_tokens"
)

// change is one row's part of an operation: v += dv, w += dw, refused when
// floor is set and v would go below zero.
type change struct {
	key    int64
	dv, dw int64
	floor  bool
}

// apply returns the row's new values, or ok false when the floor refuses
// the change.
func (c change) apply(v, w int64) (nv, nw int64, ok bool) {
	nv, nw = v+c.dv, w+c.dw
	if c.floor && nv < 0 {
		return v, w, false
	}
	return nv, nw, true
}

// op is one operation: a read of one key, or changes to one or two rows,
// applied in the order given.
type op struct {
	read    bool
	key     int64 // read
	changes []change
}

// result is what a successful operation did.
type result uint8

const (
	resDone     result = iota // the change committed
	resRejected               // refused by the workload's rule (sold out, insufficient funds)
	resRead                   // a read
)

// workload generates operations and knows its table and initial values.
type workload struct {
	name      string
	table     string
	initV     int64
	readRatio float64 // mixed only
	valueOnly bool    // the strategy keeps v only: w is not checked
}

func newWorkload(name string, s *Settings) workload {
	switch name {
	case Inventory:
		return workload{name: name, table: tableInventory, initV: s.Stock}
	case Transfer:
		return workload{name: name, table: tableAccounts, initV: s.Balance}
	case Mixed:
		return workload{name: name, table: tableCounters, readRatio: s.ReadRatio}
	}
	return workload{name: Counter, table: tableCounters}
}

// minKeys is the smallest key space the workload needs.
func (wl workload) minKeys() int {
	if wl.name == Transfer {
		return 2
	}
	return 1
}

// next fills o with the next operation.
func (wl workload) next(r *rand.Rand, ch chooser, o *op) {
	o.read = false
	o.changes = o.changes[:0]
	switch wl.name {
	case Inventory:
		o.changes = append(o.changes, change{key: ch.next(r), dv: -1, dw: 1, floor: true})
	case Transfer:
		a, b := pair(ch, r)
		amount := 1 + r.Int64N(10)
		o.changes = append(o.changes,
			change{key: a, dv: -amount, floor: true},
			change{key: b, dv: amount})
	case Mixed:
		if r.Float64() < wl.readRatio {
			o.read, o.key = true, ch.next(r)
			return
		}
		o.changes = append(o.changes, change{key: ch.next(r), dv: 1})
	default:
		o.changes = append(o.changes, change{key: ch.next(r), dv: 1})
	}
}

// tally is what the clients know about one row: the sum of the changes
// acknowledged as committed, and the bounds of the changes whose outcome
// is unknown (an error that may have followed a commit).
type tally struct {
	ackV, ackW         int64
	unkVLow, unkVHigh  int64 // unknown changes of v: sum of negatives, sum of positives
	unkWLow, unkWHigh  int64
	unknownOps, ackOps int64
}

type tallies map[int64]*tally

func (t tallies) get(k int64) *tally {
	x := t[k]
	if x == nil {
		x = &tally{}
		t[k] = x
	}
	return x
}

func (t tallies) ack(o *op) {
	for _, c := range o.changes {
		x := t.get(c.key)
		x.ackV += c.dv
		x.ackW += c.dw
		x.ackOps++
	}
}

func (t tallies) unknown(o *op) {
	for _, c := range o.changes {
		x := t.get(c.key)
		x.unknownOps++
		if c.dv < 0 {
			x.unkVLow += c.dv
		} else {
			x.unkVHigh += c.dv
		}
		if c.dw < 0 {
			x.unkWLow += c.dw
		} else {
			x.unkWHigh += c.dw
		}
	}
}

func (t tallies) merge(o tallies) {
	for k, y := range o {
		x := t.get(k)
		x.ackV += y.ackV
		x.ackW += y.ackW
		x.unkVLow += y.unkVLow
		x.unkVHigh += y.unkVHigh
		x.unkWLow += y.unkWLow
		x.unkWHigh += y.unkWHigh
		x.unknownOps += y.unknownOps
		x.ackOps += y.ackOps
	}
}

// Check is the correctness verdict of a cell.
type Check struct {
	// Status is CheckPassed, CheckFailed or CheckSkipped.
	Status string `json:"status"`
	// Detail says what was compared, or what was wrong (the first rows).
	Detail string `json:"detail"`
	// Unknown counts operations whose outcome is unknown; the check then
	// accepts every value between "none of them committed" and "all did".
	Unknown int64 `json:"unknown,omitempty"`
}

// Check statuses.
const (
	CheckPassed  = "PASSED"
	CheckFailed  = "FAILED"
	CheckSkipped = "SKIPPED"
)

// rowState is a row read back after a cell.
type rowState struct{ v, w int64 }

// check compares the rows with the tallies:
//   - every row: initial + acknowledged ≤ value ≤ initial + acknowledged +
//     unknown (lost updates make it lower, duplicated ones higher);
//   - inventory: stock never below 0 and sold = initial − stock;
//   - transfer: balances never below 0 and the total conserved.
func (wl workload) check(rows map[int64]rowState, keys int64, t tallies) Check {
	var bad []string
	fail := func(format string, args ...any) {
		if len(bad) < 3 {
			bad = append(bad, fmt.Sprintf(format, args...))
		} else if len(bad) == 3 {
			bad = append(bad, "…")
		}
	}
	var unknown, acked, total int64
	for k := int64(1); k <= keys; k++ {
		r, ok := rows[k]
		if !ok {
			fail("row %d missing", k)
			continue
		}
		x := t[k]
		if x == nil {
			x = &tally{}
		}
		unknown += x.unknownOps
		acked += x.ackOps
		total += r.v
		dv := r.v - wl.initV
		if dv < x.ackV+x.unkVLow || dv > x.ackV+x.unkVHigh {
			fail("row %d: v changed by %d, clients acknowledged %d (unknown %+d..%+d)", k, dv, x.ackV, x.unkVLow, x.unkVHigh)
		}
		if !wl.valueOnly && (r.w < x.ackW+x.unkWLow || r.w > x.ackW+x.unkWHigh) {
			fail("row %d: w is %d, clients acknowledged %d (unknown %+d..%+d)", k, r.w, x.ackW, x.unkWLow, x.unkWHigh)
		}
		switch wl.name {
		case Inventory:
			if r.v < 0 {
				fail("row %d: stock %d below 0", k, r.v)
			}
			if !wl.valueOnly && r.w != wl.initV-r.v {
				fail("row %d: sold %d ≠ initial %d − stock %d", k, r.w, wl.initV, r.v)
			}
		case Transfer:
			if r.v < 0 {
				fail("account %d: balance %d below 0", k, r.v)
			}
		}
	}
	if wl.name == Transfer && total != wl.initV*keys {
		fail("total %d ≠ %d (money created or destroyed)", total, wl.initV*keys)
	}
	if len(bad) > 0 {
		return Check{Status: CheckFailed, Detail: joinSemi(bad), Unknown: unknown}
	}
	detail := fmt.Sprintf("%d rows match %d acknowledged row changes", keys, acked)
	switch wl.name {
	case Inventory:
		detail += "; stock ≥ 0"
		if !wl.valueOnly {
			detail += ", sold = initial − stock"
		}
	case Transfer:
		detail += "; total conserved"
	}
	if unknown > 0 {
		detail += fmt.Sprintf(" (within %d row changes of unknown outcome)", unknown)
	}
	return Check{Status: CheckPassed, Detail: detail, Unknown: unknown}
}

func joinSemi(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
