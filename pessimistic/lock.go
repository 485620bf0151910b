package pessimistic

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/concurkit/concurkit/internal/handle"
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
	// per-statement form: LockRows sets lock_timeout (SET LOCAL semantics)
	// around its statement, in milliseconds rounded up and at most
	// 2147483647 ms (about 24.8 days, the server's maximum), and restores
	// it afterwards; Lock.Postgres returns the clause without a wait part.
	// A Timeout above the server's maximum is clamped to it.
	WaitTimeout
)

// unknownWait marks errors from statements whose wait policy is not known.
const unknownWait WaitPolicy = 255

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
// blocking FOR UPDATE.
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

// Validate returns nil or an error wrapping ErrInvalidArgument for an
// unknown strength or wait policy, or a Timeout that does not fit the
// policy (negative, zero under WaitTimeout, non-zero elsewhere).
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

// Postgres returns the PostgreSQL locking clause with a leading space, e.g.
// " FOR NO KEY UPDATE SKIP LOCKED", to append to a SELECT. Under
// WaitTimeout the clause has no wait part: PostgreSQL bounds lock waits only
// through lock_timeout, which LockRows and Options.LockTimeout set for you.
// It returns an error wrapping ErrInvalidArgument when Validate fails.
func (l Lock) Postgres() (string, error) {
	if err := l.Validate(); err != nil {
		return "", err
	}
	s := " " + l.Strength.String()
	switch l.Wait {
	case NoWait:
		s += " NOWAIT"
	case SkipLocked:
		s += " SKIP LOCKED"
	}
	return s, nil
}

// MySQL returns the MariaDB/MySQL locking clause with a leading space, e.g.
// " FOR UPDATE WAIT 2" or " LOCK IN SHARE MODE NOWAIT". ForNoKeyUpdate
// becomes FOR UPDATE; ForShare becomes LOCK IN SHARE MODE; WaitTimeout
// becomes WAIT n with n the Timeout rounded up to whole seconds, at least 1
// and at most 31536000 (WAIT n is MariaDB syntax; MySQL 8 rejects it). It
// returns an error wrapping ErrInvalidArgument when Validate fails.
func (l Lock) MySQL() (string, error) {
	if err := l.Validate(); err != nil {
		return "", err
	}
	s := " FOR UPDATE"
	if l.Strength == ForShare {
		s = " LOCK IN SHARE MODE"
	}
	switch l.Wait {
	case NoWait:
		s += " NOWAIT"
	case SkipLocked:
		s += " SKIP LOCKED"
	case WaitTimeout:
		s += " WAIT " + strconv.FormatInt(ceilSeconds(l.Timeout), 10)
	}
	return s, nil
}

// MapError maps err, returned by a statement that used this Lock's clause,
// to the package's sentinels: under NoWait a lock conflict (PostgreSQL
// 55P03, MySQL 3572, MariaDB 1205) becomes ErrLockNotAvailable; under Wait
// or WaitTimeout a lock timeout (PostgreSQL 55P03 under lock_timeout,
// MySQL/MariaDB 1205) becomes ErrLockTimeout; deadlocks become ErrDeadlock
// and serialization failures ErrSerialization (PostgreSQL 40001, MariaDB
// 1020). If ctx has ended and err is not one of those, the wait was ended
// by the caller, not by the server: the result matches ctx.Err()
// (errors.Join(ctx.Err(), err) unless err already matches it) and not
// ErrLockTimeout. The driver error stays in the chain. Other errors (and
// nil) are returned unchanged.
func (l Lock) MapError(ctx context.Context, err error) error {
	return mapError(ctx, err, l.Wait, false)
}

// Server limits of the lock-wait settings this package writes. A duration
// converts to a server value by rounding up to the server's unit (so a
// positive duration never becomes 0, which means "no timeout" to
// PostgreSQL's lock_timeout and NOWAIT to MariaDB's WAIT) and saturating at
// the server's maximum (a longer wait than the server can express is
// clamped: the wait may end earlier than asked, with ErrLockTimeout, never
// later). Negative durations are rejected before any conversion.
const (
	// pgMaxMillis is the maximum of PostgreSQL's lock_timeout (and
	// idle_session_timeout): INT_MAX milliseconds, about 24.8 days.
	pgMaxMillis = math.MaxInt32
	// myMaxWaitSeconds is the largest MariaDB WAIT n: n sets the
	// statement's lock_wait_timeout, whose maximum is 31536000 s (365
	// days); larger values are truncated by the server with a warning.
	myMaxWaitSeconds = 31536000
	// myMaxLockWaitTimeout is the maximum of innodb_lock_wait_timeout on
	// MariaDB 10.11 (100000000 s, about 3.2 years); MySQL 8 allows
	// 1073741824, so this value is valid on both.
	myMaxLockWaitTimeout = 100000000
)

// ceilUnits returns d in units of unit, rounded up, at least 1 and at
// most limit. d must be positive; it never overflows (d + unit - 1 would,
// for d near math.MaxInt64).
func ceilUnits(d, unit time.Duration, limit int64) int64 {
	n := int64(d / unit)
	if d%unit != 0 {
		n++
	}
	return min(max(n, 1), limit)
}

// ceilSeconds rounds d up to whole seconds for MariaDB's WAIT n: at least
// 1 (WAIT 0 is NOWAIT), at most myMaxWaitSeconds.
func ceilSeconds(d time.Duration) int64 { return ceilUnits(d, time.Second, myMaxWaitSeconds) }

// pgInterval formats d for lock_timeout: milliseconds, rounded up, at least
// 1 (0 disables the timeout), at most pgMaxMillis.
func pgInterval(d time.Duration) string {
	return strconv.FormatInt(ceilUnits(d, time.Millisecond, pgMaxMillis), 10) + "ms"
}

// rowsTarget validates what LockRows and LockRowsMySQL share: the
// transaction, the table and column (validated and quoted with the
// dialect's q) and the lock's clause in that dialect. It returns
// ErrInvalidArgument, or the error of clause.
func rowsTarget(tx any, table, column string, q func(parts ...string) (string, error), clause func() (string, error)) (t, c, cl string, err error) {
	if handle.IsNil(tx) {
		return "", "", "", invalid("nil transaction")
	}
	if t, err = q(table); err != nil {
		return "", "", "", invalid("table: %w", err)
	}
	if c, err = q(column); err != nil {
		return "", "", "", invalid("column: %w", err)
	}
	if cl, err = clause(); err != nil {
		return "", "", "", err
	}
	return t, c, cl, nil
}
