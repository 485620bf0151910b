package deadlock

import (
	"fmt"
	"slices"

	"github.com/concurkit/concurkit"
)

// NotSerializableError reports a cycle in a history's precedence graph. It
// matches ErrNotSerializable with errors.Is.
type NotSerializableError struct {
	// Cycle lists transactions T1 → T2 → ... → T1, each having a
	// conflicting operation before the next one's.
	Cycle []TxnID
}

// Error names the precedence cycle.
func (e *NotSerializableError) Error() string {
	return fmt.Sprintf("deadlock: history is not conflict-serializable: precedence cycle %s", txnList(e.Cycle))
}

// Is makes errors.Is(err, ErrNotSerializable) true.
func (e *NotSerializableError) Is(target error) bool { return target == ErrNotSerializable }

// CheckSerializable reports whether a history (operations in execution
// order, committed transactions only) is conflict-serializable: its
// precedence graph — an edge Ti → Tj when an operation of Ti precedes a
// conflicting one of Tj on the same resource, at least one of them a
// write — has no cycle. It returns nil or a *NotSerializableError naming a
// cycle. Think steps are ignored. It runs in time linear in the history.
//
// A nil history is not a history: it is what Result.History holds when
// the run did not record one (Options.History unset), and checking it
// would pass whatever the run did, so CheckSerializable returns
// ErrNoHistory. An empty non-nil history (a recorded run that committed
// nothing) is serializable. To check a run, prefer Result.CheckSerializable.
func CheckSerializable(history []HistoryOp) error {
	if history == nil {
		return fmt.Errorf("%w: nil history", ErrNoHistory)
	}
	type resState struct {
		writer  TxnID
		readers []TxnID
	}
	res := make(map[Resource]*resState)
	adj := make(map[TxnID][]TxnID)
	addEdge := func(a, b TxnID) {
		if a != 0 && a != b {
			adj[a] = append(adj[a], b)
		}
	}
	var nodes []TxnID
	for _, op := range history {
		if op.Kind != Read && op.Kind != Write {
			continue
		}
		if _, ok := adj[op.Txn]; !ok {
			adj[op.Txn] = nil
			nodes = append(nodes, op.Txn)
		}
		st := res[op.Resource]
		if st == nil {
			st = &resState{}
			res[op.Resource] = st
		}
		// Edges to the last writer and to the readers since it keep the
		// reachability of the full precedence graph: earlier writers and
		// readers precede that last writer already.
		addEdge(st.writer, op.Txn)
		if op.Kind == Read {
			if !slices.Contains(st.readers, op.Txn) {
				st.readers = append(st.readers, op.Txn)
			}
			continue
		}
		for _, r := range st.readers {
			addEdge(r, op.Txn)
		}
		st.writer = op.Txn
		st.readers = st.readers[:0]
	}
	// Iterative DFS with colours; a grey successor closes a cycle.
	const (
		white = iota
		grey
		black
	)
	colour := make(map[TxnID]uint8, len(nodes))
	parent := make(map[TxnID]TxnID, len(nodes))
	type frame struct {
		n TxnID
		i int
	}
	for _, root := range nodes {
		if colour[root] != white {
			continue
		}
		stack := []frame{{n: root}}
		colour[root] = grey
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.i == len(adj[f.n]) {
				colour[f.n] = black
				stack = stack[:len(stack)-1]
				continue
			}
			next := adj[f.n][f.i]
			f.i++
			switch colour[next] {
			case white:
				colour[next] = grey
				parent[next] = f.n
				stack = append(stack, frame{n: next})
			case grey:
				cyc := []TxnID{f.n}
				for x := f.n; x != next; {
					x = parent[x]
					cyc = append(cyc, x)
				}
				slices.Reverse(cyc)
				return &NotSerializableError{Cycle: cyc}
			}
		}
	}
	return nil
}

// CheckSerializable checks that the run's committed history is
// conflict-serializable (see the function CheckSerializable). A run
// simulated without Options.History has no history to check: that is
// ErrNoHistory, never a pass. A nil Result matches
// concurkit.ErrInvalidArgument.
func (r *Result) CheckSerializable() error {
	if r == nil {
		return fmt.Errorf("%w: deadlock: nil Result", concurkit.ErrInvalidArgument)
	}
	if r.History == nil {
		return fmt.Errorf("%w: the run committed %d transactions without recording them (set Options.History)", ErrNoHistory, r.Committed)
	}
	return CheckSerializable(r.History)
}
