package deadlock

import (
	"bufio"
	"fmt"
	"io"
	"slices"
)

// Edge is one wait-for edge: From waits for To because From's request for
// Resource in Mode conflicts with To's lock or earlier request.
type Edge struct {
	From, To TxnID
	Resource Resource
	Mode     Mode
}

// WaitForGraph is a snapshot of the wait-for graph, with the cycle found
// (if any) and the victim chosen to break it.
type WaitForGraph struct {
	Time   Time    // logical time of the snapshot (0 outside the simulator)
	Edges  []Edge  // sorted by From, then To
	Cycle  []TxnID // the deadlock cycle in wait order, or nil
	Victim TxnID   // the aborted transaction, 0 if none
}

// Graph returns a snapshot of the whole wait-for graph, edges sorted. The
// result's Cycle and Victim are left empty for the caller to fill.
func (m *LockManager) Graph() *WaitForGraph {
	g := &WaitForGraph{}
	ids := make([]TxnID, 0, len(m.txns))
	for id, t := range m.txns {
		if t.waitOn != nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		t := m.txns[id]
		m.buf = appendBlockers(t, m.buf[:0])
		to := make([]TxnID, len(m.buf))
		for i, b := range m.buf {
			to[i] = b.id
		}
		slices.Sort(to)
		for _, b := range to {
			g.Edges = append(g.Edges, Edge{From: id, To: b, Resource: t.waitOn.res, Mode: t.waitMod})
		}
	}
	return g
}

// WriteDOT writes the graph in Graphviz DOT: one node per transaction, one
// edge per wait labelled with the resource and requested mode; the cycle's
// nodes and edges are drawn red and bold and the victim is filled. It
// returns the writer's error, if any.
func (g *WaitForGraph) WriteDOT(w io.Writer) error {
	bw := bufio.NewWriter(w)
	inCycle := make(map[TxnID]bool, len(g.Cycle))
	cycleEdge := make(map[[2]TxnID]bool, len(g.Cycle))
	for i, t := range g.Cycle {
		inCycle[t] = true
		cycleEdge[[2]TxnID{t, g.Cycle[(i+1)%len(g.Cycle)]}] = true
	}
	var nodes []TxnID
	for _, e := range g.Edges {
		nodes = append(nodes, e.From, e.To)
	}
	nodes = append(nodes, g.Cycle...)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)

	fmt.Fprintf(bw, "digraph waitfor {\n")
	fmt.Fprintf(bw, "  label=%q;\n", fmt.Sprintf("wait-for graph at t=%s", g.Time))
	fmt.Fprintf(bw, "  rankdir=LR;\n  node [shape=circle, fontname=\"Helvetica\"];\n  edge [fontname=\"Helvetica\", fontsize=10];\n")
	for _, n := range nodes {
		attr := ""
		switch {
		case n == g.Victim && inCycle[n]:
			attr = ` [color=red, penwidth=2, style=filled, fillcolor="#ffcccc", xlabel="victim"]`
		case inCycle[n]:
			attr = " [color=red, penwidth=2]"
		}
		fmt.Fprintf(bw, "  T%d%s;\n", n, attr)
	}
	for _, e := range g.Edges {
		attr := ""
		if cycleEdge[[2]TxnID{e.From, e.To}] {
			attr = ", color=red, penwidth=2.5"
		}
		fmt.Fprintf(bw, "  T%d -> T%d [label=\"r%d %s\"%s];\n", e.From, e.To, e.Resource, e.Mode, attr)
	}
	fmt.Fprintf(bw, "}\n")
	return bw.Flush()
}
