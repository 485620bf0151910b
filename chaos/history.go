package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
)

// Outcome is what a client knows about an operation once it returned.
type Outcome uint8

// The outcomes. Pending is an invocation whose completion was never
// recorded (its process was killed, or the run ended first): for a checker
// it is as ambiguous as Unknown.
const (
	Pending Outcome = iota
	// OK: the operation took effect and the client was told so.
	OK
	// Fail: the operation certainly did not take effect (refused by a
	// check, or failed before anything was sent).
	Fail
	// Unknown: the operation may or may not have taken effect (a timeout,
	// a reset connection, a cancelled context after the request was sent,
	// a COMMIT whose answer was lost).
	Unknown
)

var outcomeNames = [...]string{"pending", "ok", "fail", "unknown"}

// String returns "pending", "ok", "fail" or "unknown".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Ambiguous reports whether the operation may or may not have taken
// effect: Pending or Unknown.
func (o Outcome) Ambiguous() bool { return o == Pending || o == Unknown }

// MarshalText encodes o by name, so histories read as text.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText decodes a name written by MarshalText.
func (o *Outcome) UnmarshalText(b []byte) error {
	for i, n := range outcomeNames {
		if n == string(b) {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("chaos: unknown outcome %q", b)
}

// Op is one operation of a history: its invocation and, once known, its
// completion. Times are wall-clock Unix nanoseconds, comparable across
// the processes of one machine. Which of the value fields an operation
// uses depends on its Kind (see each workload).
type Op struct {
	// Process is the client process (or goroutine) that ran the operation;
	// a process restarted after a kill gets a new number.
	Process int `json:"process"`
	// Seq numbers the process's operations from 1.
	Seq int64 `json:"seq"`
	// Kind names the operation ("read", "write", "cas", "incr", …).
	Kind string `json:"kind"`
	// Key is the object operated on (a register, a counter, a lock key).
	Key string `json:"key,omitempty"`
	// Token is the fencing token the operation carried, if any.
	Token int64 `json:"token,omitempty"`
	// Arg is the value written (write, the new value of a cas or incr).
	Arg int64 `json:"arg,omitempty"`
	// Expect is the value a cas expected.
	Expect int64 `json:"expect,omitempty"`
	// Ret is the value read.
	Ret int64 `json:"ret,omitempty"`
	// Call and Return are when the operation was invoked and returned
	// (Return is 0 while Pending).
	Call   int64 `json:"call"`
	Return int64 `json:"return,omitempty"`
	// Outcome is what the client knows about the operation's effect.
	Outcome Outcome `json:"outcome"`
	// Err is the error the operation returned, if any.
	Err string `json:"err,omitempty"`
}

// History collects the operations of a run. Add may be called from many
// goroutines; an operation is first added Pending (its invocation) and
// then again with its outcome (its completion), matched on Process and
// Seq, so that an operation whose process dies in between stays in the
// history as Pending. The zero History is ready to use.
type History struct {
	mu  sync.Mutex
	ops []Op
	at  map[[2]int64]int // (process, seq) → index in ops
}

// Add records op: a Pending op is an invocation; an op with an outcome
// completes the invocation with the same Process and Seq (or is added on
// its own if there was none).
func (h *History) Add(op Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at == nil {
		h.at = map[[2]int64]int{}
	}
	id := [2]int64{int64(op.Process), op.Seq}
	if i, ok := h.at[id]; ok {
		h.ops[i] = op
		return
	}
	h.at[id] = len(h.ops)
	h.ops = append(h.ops, op)
}

// Ops returns a copy of the history, ordered by invocation time.
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	slices.SortStableFunc(ops, func(a, b Op) int { return cmpInt64(a.Call, b.Call) })
	return ops
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// WriteHistory writes ops as JSON lines, one operation per line.
func WriteHistory(w io.Writer, ops []Op) error {
	enc := json.NewEncoder(w)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return fmt.Errorf("chaos: write history: %w", err)
		}
	}
	return nil
}

// ReadHistory reads a history written by WriteHistory (or a worker's event
// stream): JSON lines, later lines completing earlier invocations as in
// History.Add.
func ReadHistory(r io.Reader) ([]Op, error) {
	var h History
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("chaos: history line %d: %w", n, err)
		}
		h.Add(op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("chaos: read history: %w", err)
	}
	return h.Ops(), nil
}

// Anomaly is one violation a checker found.
type Anomaly struct {
	// Kind names the violation ("lost-update", "stale-write", …).
	Kind string `json:"kind"`
	// Detail says where: the operations or rows involved.
	Detail string `json:"detail"`
}

// Report is a checker's verdict on one history.
type Report struct {
	// Valid is true when the checker found no anomaly.
	Valid bool `json:"valid"`
	// Anomalies lists what was found (capped per kind; see Counts).
	Anomalies []Anomaly `json:"anomalies,omitempty"`
	// Counts is the number of anomalies found, by kind.
	Counts map[string]int `json:"counts,omitempty"`
	// Notes are facts a reader needs to weigh the verdict (ambiguous
	// operations, checks that timed out).
	Notes []string `json:"notes,omitempty"`
}

// maxDetails bounds the anomalies of one kind a Report lists.
const maxDetails = 20

// add records an anomaly of kind.
func (r *Report) add(kind, format string, args ...any) {
	if r.Counts == nil {
		r.Counts = map[string]int{}
	}
	r.Counts[kind]++
	if r.Counts[kind] <= maxDetails {
		r.Anomalies = append(r.Anomalies, Anomaly{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
}

// note records a fact about the check.
func (r *Report) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// finish sets Valid.
func (r *Report) finish() *Report {
	r.Valid = len(r.Counts) == 0
	return r
}
