package saga

import (
	"context"
	"encoding/json"
	"time"
)

// Store persists saga instances: sagapg.Store (PostgreSQL) and
// sagamysql.Store (MariaDB/MySQL) implement it on the table
// concurkit_sagas of the toolkit migrations. Run calls it from one
// goroutine at a time per instance; a Store must be safe for concurrent
// use by many Runs.
//
// Every write by a runner is fenced by its claim: Save and Extend succeed
// only while rec.Claim is still the instance's claim, in the same
// statement, so a runner whose lease passed to another can never record
// anything after the takeover.
type Store interface {
	// Claim inserts fresh if no instance has fresh.Key, and returns it,
	// claimed. Otherwise, if the stored instance is not finished (Running
	// or Compensating) and its lease is free or ended (LeaseUntil zero or
	// not after now), it takes the lease for fresh's runner — sets Claim
	// to fresh.Claim, LeaseUntil to fresh.LeaseUntil and Updated to
	// fresh.Updated, leaving the rest as stored — and returns the stored
	// instance, claimed. Otherwise it returns the stored instance
	// unchanged, not claimed. The check and the write are one atomic
	// step: of two concurrent Claims, at most one claims.
	Claim(ctx context.Context, fresh *Record, now time.Time) (rec *Record, claimed bool, err error)
	// Save writes every field of rec but Key, Definition, Version, Input,
	// InputHash, Claim and Created (which never change after the insert)
	// if rec.Claim is still the stored claim, and returns ErrLeaseLost
	// otherwise. A zero LeaseUntil releases the lease.
	Save(ctx context.Context, rec *Record) error
	// Extend sets the lease of instance key to until if claim is still its
	// claim, and returns ErrLeaseLost otherwise.
	Extend(ctx context.Context, key string, claim int64, until time.Time) error
}

// Status is the state of a saga instance.
//
//	Running ──▶ Completed
//	   │
//	   └──▶ Compensating ──▶ Compensated
//
// Completed and Compensated are final: Run returns their outcome without
// calling anything. A Compensating instance whose compensation failed
// stays Compensating (there is no "failed" end state that would stop
// recovery); the next Run resumes the compensation.
type Status string

// The states of an instance.
const (
	Running      Status = "running"      // actions run, in order
	Completed    Status = "completed"    // every action succeeded
	Compensating Status = "compensating" // an action failed; completed steps are being compensated
	Compensated  Status = "compensated"  // every completed step was compensated
)

// Finished reports whether s is a final state (Completed or Compensated).
func (s Status) Finished() bool { return s == Completed || s == Compensated }

// StepStatus is the state of one step of an instance.
//
//	Pending ──▶ Running ──▶ Done ──▶ Compensated
//	               │
//	               └──▶ Failed
//
// A step found Running by a resumed saga was started and not recorded done
// (its runner crashed, or lost its connection): its action runs again with
// the same key.
type StepStatus string

// The states of a step.
const (
	StepPending     StepStatus = "pending"     // not started
	StepRunning     StepStatus = "running"     // action started, outcome not recorded
	StepDone        StepStatus = "done"        // action succeeded; Result holds its output
	StepFailed      StepStatus = "failed"      // action failed; the saga compensates the steps before it
	StepCompensated StepStatus = "compensated" // compensation succeeded (or the step has none)
)

// Record is a persisted saga instance: what a Store reads and writes. It is
// exported for Store implementations and for inspection (the adapters'
// Load); Run owns the records it works on.
type Record struct {
	Key        string          // the instance key given to Run
	Definition string          // the name of the definition that started it
	Version    int             // that definition's version
	Input      json.RawMessage // the input given to Run, JSON-encoded
	InputHash  []byte          // SHA-256 of Input as Run encoded it
	Status     Status
	Steps      []StepRecord // one per step of the definition, in order
	// Error is the latest failure: the failed action's error, then the
	// latest failed compensation's. Empty when nothing failed.
	Error string
	// Claim identifies the current (or latest) lease holder's claim: a
	// random number drawn by each Claim, the fencing token of Save and
	// Extend.
	Claim int64
	// LeaseUntil is when the holder's lease ends; zero when no runner holds
	// it.
	LeaseUntil time.Time
	Created    time.Time
	Updated    time.Time
}

// StepRecord is the persisted state of one step. It is stored as JSON.
type StepRecord struct {
	Name   string     `json:"name"`
	Status StepStatus `json:"status"`
	// Attempts counts the runs that marked the step started (see
	// Call.Attempt; retries within one run count once).
	Attempts int `json:"attempts"`
	// Result is the action's output, JSON-encoded, once the step is Done
	// (and kept after it is compensated).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the action's error of a Failed step, or the latest error of
	// a compensation that failed.
	Error string `json:"error,omitempty"`
}

// DefaultTable is the table of the toolkit migrations (0004_saga) that the
// adapters use when Table.Name is empty.
const DefaultTable = "concurkit_sagas"

// Table names the table that holds saga instances, with the columns of the
// toolkit migration 0004_saga. The zero Table is DefaultTable in the
// connection's default schema (PostgreSQL search_path) or database (MySQL).
type Table struct {
	// Schema optionally qualifies Name. Empty means the connection's
	// default.
	Schema string
	// Name is the table. Default DefaultTable.
	Name string
}
