package deadlock

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// TraceKind is the kind of a trace event.
type TraceKind uint8

// Trace event kinds.
const (
	TraceStart    TraceKind = iota + 1 // an attempt starts (Txn)
	TraceGrant                         // Txn got Resource in Mode
	TraceWait                          // Txn waits for Resource in Mode, blocked by Txns
	TraceDeadlock                      // a cycle Txns was found; Txn is the victim
	TraceAbort                         // Txn's attempt aborted for Cause
	TraceCommit                        // Txn committed
)

// TraceEvent is one line of the schedule trace.
type TraceEvent struct {
	Time     Time
	Kind     TraceKind
	Txn      TxnID
	Resource Resource
	Mode     Mode
	Txns     []TxnID // blockers of a wait, or the deadlock cycle
	Cause    Cause
}

// String formats the event as one trace line, e.g.
// "t=20µs     T2 wait X r1 for [T1]".
func (e TraceEvent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "t=%-9s T%-4d ", e.Time, e.Txn)
	switch e.Kind {
	case TraceStart:
		b.WriteString("start")
	case TraceGrant:
		fmt.Fprintf(&b, "lock %s r%d", e.Mode, e.Resource)
	case TraceWait:
		fmt.Fprintf(&b, "wait %s r%d for %s", e.Mode, e.Resource, txnList(e.Txns))
	case TraceDeadlock:
		fmt.Fprintf(&b, "deadlock %s, victim T%d", txnList(e.Txns), e.Txn)
	case TraceAbort:
		fmt.Fprintf(&b, "abort (%s)", e.Cause)
	case TraceCommit:
		b.WriteString("commit")
	default:
		fmt.Fprintf(&b, "TraceKind(%d)", uint8(e.Kind))
	}
	return b.String()
}

func txnList(ids []TxnID) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "T%d", id)
	}
	b.WriteByte(']')
	return b.String()
}

// WriteTrace writes r.Trace, one event per line. The trace is empty unless
// the run had Options.Trace set. It returns the writer's error, if any.
func (r *Result) WriteTrace(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, e := range r.Trace {
		bw.WriteString(e.String())
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
