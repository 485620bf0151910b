package durability

import (
	"strings"
)

// ErrNotDurable is matched (errors.Is) by the *Error that Check returns
// when the server can lose a commit it acknowledged, or cannot take a
// write at all.
var ErrNotDurable error = &sentinel{}

type sentinel struct{}

func (*sentinel) Error() string { return "durability: server may lose acknowledged commits" }

// Loss is what a Problem costs.
type Loss int

const (
	// Crash: a crash of the server (or of its machine) loses commits it had
	// acknowledged.
	Crash Loss = iota + 1
	// Failover: promoting a replica loses commits the old primary had
	// acknowledged but the replica had not received.
	Failover
	// NotWritable: the session is on a server that takes no writes (a
	// standby, a read-only server, a Galera node outside the primary
	// component).
	NotWritable
)

// String returns "crash", "failover" or "not writable".
func (l Loss) String() string {
	switch l {
	case Crash:
		return "crash"
	case Failover:
		return "failover"
	case NotWritable:
		return "not writable"
	}
	return "unknown"
}

// Problem is one server setting or state that breaks the promise.
type Problem struct {
	// Setting names what was read: a server variable
	// ("synchronous_commit"), a status ("wsrep_cluster_status") or a
	// replica ("standby pgasync").
	Setting string
	// Value is what the server reported.
	Value string
	// Want is the value that keeps the promise.
	Want string
	// Loss is what can happen.
	Loss Loss
	// Detail says it in a sentence.
	Detail string
}

// String formats the problem on one line.
func (p Problem) String() string {
	return p.Loss.String() + ": " + p.Setting + " = " + p.Value + " (want " + p.Want + "): " + p.Detail
}

// Error is what Check returns when the server cannot keep its commits: all
// the problems found, in the order they were read.
type Error struct {
	// Server is "postgresql" or "mysql".
	Server   string
	Problems []Problem
}

// Error lists the problems, separated by "; ".
func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "durability: " + e.Server + " may lose acknowledged commits: " + strings.Join(parts, "; ")
}

// Is reports whether target is ErrNotDurable.
func (e *Error) Is(target error) bool { return target == ErrNotDurable }

// Has reports whether one of the problems costs l.
func (e *Error) Has(l Loss) bool {
	for _, p := range e.Problems {
		if p.Loss == l {
			return true
		}
	}
	return false
}

// Result returns nil when problems is empty, else an *Error of server
// holding them. The adapters return it from Check.
func Result(server string, problems []Problem) error {
	if len(problems) == 0 {
		return nil
	}
	return &Error{Server: server, Problems: problems}
}
