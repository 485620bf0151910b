package pessimistic

import (
	"strconv"
	"time"
)

// Strength is the row-lock strength of a locking read.
type Strength uint8

// Lock strengths. The zero value is ForUpdate.
const (
	// ForUpdate takes an exclusive row lock: FOR UPDATE.
	ForUpdate Strength = iota
	// ForNoKeyUpdate is PostgreSQL's FOR NO KEY UPDATE: exclusive, but it
	// does not block FOR KEY SHARE (foreign-key checks of inserts in child
	// tables). MySQL/MariaDB have no such mode; there it becomes FOR UPDATE,
	// which is stronger, so correctness is kept and only concurrency with
	// foreign-key checks is lost.
	ForNoKeyUpdate
	// ForShare takes a shared row lock: PostgreSQL FOR SHARE, MySQL/MariaDB
	// LOCK IN SHARE MODE (MariaDB 10.11 does not accept FOR SHARE; MySQL 8
	// accepts both).
	ForShare
)

// String returns the PostgreSQL spelling of the strength, e.g. "FOR UPDATE".
func (s Strength) String() string {
	switch s {
	case ForUpdate:
		return "FOR UPDATE"
	case ForNoKeyUpdate:
		return "FOR NO KEY UPDATE"
	case ForShare:
		return "FOR SHARE"
	}
	return "Strength(" + strconv.Itoa(int(s)) + ")"
}

// WaitPolicy says what a locking read does when a row is locked by another
// transaction.
type WaitPolicy uint8

// Wait policies. The zero value is Wait.
const (
	// Wait blocks until the lock is granted (or the server's own lock
	// timeout, or the context, ends the wait).
	Wait WaitPolicy = iota
	// NoWait fails at once with ErrLockNotAvailable.
	NoWait
	// SkipLocked leaves locked rows out of the result.
	SkipLocked
	// WaitTimeout waits at most Lock.Timeout, then fails with
	// ErrLockTimeout. MariaDB: the clause WAIT n, n = Timeout rounded up to
	// whole seconds (MariaDB truncates fractions, and WAIT 0 is NOWAIT),
	// at most 31536000 (365 days, the server's maximum). PostgreSQL has no
	// per-statement form: pessimisticpg.LockRows sets lock_timeout (SET
	// LOCAL semantics) around its statement, in milliseconds rounded up and
	// at most 2147483647 ms (about 24.8 days, the server's maximum), and
	// restores it afterwards; pessimisticpg.Clause returns the clause
	// without a wait part. A Timeout above the server's maximum is clamped
	// to it. The adapters' LockRows accept WaitTimeout only on a
	// transaction (pgx.Tx, *sql.Tx): outside one, PostgreSQL ignores the
	// transaction-scoped lock_timeout and the wait would be unbounded.
	WaitTimeout
)

// String returns the policy's Go name, e.g. "NoWait".
func (w WaitPolicy) String() string {
	switch w {
	case Wait:
		return "Wait"
	case NoWait:
		return "NoWait"
	case SkipLocked:
		return "SkipLocked"
	case WaitTimeout:
		return "WaitTimeout"
	}
	return "WaitPolicy(" + strconv.Itoa(int(w)) + ")"
}

// Lock describes the locking clause of a SELECT. The zero value is a plain
// blocking FOR UPDATE. The adapters render it in their dialect
// (pessimisticpg.Clause, pessimisticmysql.Clause), use it in LockRows, and
// map the errors of a statement that used it (MapError).
type Lock struct {
	Strength Strength
	Wait     WaitPolicy
	// Timeout is the longest wait under WaitTimeout and must be positive
	// there; it must be zero under every other policy. It is rounded up to
	// the server's unit (never down to 0, which servers read as "no
	// timeout" or NOWAIT) and clamped to the server's maximum; see
	// WaitTimeout.
	Timeout time.Duration
}

// Validate returns nil or an error matching concurkit.ErrInvalidArgument
// for an unknown strength or wait policy, or a Timeout that does not fit
// the policy (negative, zero under WaitTimeout, non-zero elsewhere).
func (l Lock) Validate() error {
	switch {
	case l.Strength > ForShare:
		return invalid("unknown lock strength %v", l.Strength)
	case l.Wait > WaitTimeout:
		return invalid("unknown wait policy %v", l.Wait)
	case l.Timeout < 0:
		return invalid("negative lock timeout %v", l.Timeout)
	case l.Wait == WaitTimeout && l.Timeout == 0:
		return invalid("WaitTimeout needs a positive Timeout")
	case l.Wait != WaitTimeout && l.Timeout != 0:
		return invalid("Timeout %v set with wait policy %v (use WaitTimeout)", l.Timeout, l.Wait)
	}
	return nil
}
