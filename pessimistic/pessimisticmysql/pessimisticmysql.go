package pessimisticmysql

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/internal/sqlerr"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/internal/txn"
)

// pkg names this package in errors and observe events.
const pkg = "pessimisticmysql"

// DBTX is the database/sql query interface: *sql.DB, *sql.Conn and *sql.Tx
// satisfy it. The helpers generate MariaDB 10.11 / MySQL 8 syntax for
// github.com/go-sql-driver/mysql; row locks last until the end of the
// transaction, so LockRows and ClaimJobs are meant to be given a *sql.Tx.
// InTx takes a DBTX too: a Beginner, on which it begins the transaction,
// or a *sql.Tx the caller already opened.
type DBTX = sqldb.DBTX

// Beginner starts database/sql transactions: *sql.DB and *sql.Conn satisfy
// it. Given one, InTx begins and owns the transaction (and retries it).
type Beginner = sqldb.Beginner

var (
	_ DBTX     = (*sql.DB)(nil)
	_ DBTX     = (*sql.Conn)(nil)
	_ DBTX     = (*sql.Tx)(nil)
	_ Beginner = (*sql.DB)(nil)
	_ Beginner = (*sql.Conn)(nil)
)

func invalid(format string, args ...any) error { return txn.Invalid(pkg, format, args...) }

// mapError maps a go-sql-driver/mysql error to pessimistic's sentinels.
// wait is the wait policy of the statement that failed, or
// txn.UnknownWait (a statement the caller ran inside InTx).
//
// MariaDB reports NOWAIT with 1205, the lock-wait-timeout number: only a
// statement known to have used NOWAIT maps it to ErrLockNotAvailable.
// MySQL 8's 3572 is always ErrLockNotAvailable; MariaDB's 1020 (record
// changed since the snapshot) is ErrSerialization.
func mapError(ctx context.Context, err error, wait pessimistic.WaitPolicy) error {
	if err == nil || txn.Mapped(err) {
		return err
	}
	c := mysqlerr.Classify(err)
	if c == sqlerr.LockTimeout && wait == pessimistic.NoWait {
		c = sqlerr.LockNotAvailable
	}
	return txn.Map(ctx, err, c)
}

// MapError maps err, returned by a statement of your own that used lock's
// clause (see Clause), to pessimistic's sentinels: under NoWait a lock
// conflict (MariaDB 1205, MySQL 3572) becomes ErrLockNotAvailable; under
// Wait or WaitTimeout a lock timeout (1205) becomes ErrLockTimeout;
// deadlocks (1213) become ErrDeadlock and MariaDB's 1020 ErrSerialization.
// If ctx has ended and err is not one of those, the wait was ended by the
// caller, not by the server: the result matches ctx.Err()
// (errors.Join(ctx.Err(), err) unless err already matches it) and not
// ErrLockTimeout. The driver error stays in the chain. Other errors (and
// nil) are returned unchanged, and so is an error already mapped.
func MapError(ctx context.Context, lock pessimistic.Lock, err error) error {
	return mapError(ctx, err, lock.Wait)
}

// Clause returns lock's MariaDB/MySQL locking clause with a leading space,
// e.g. " FOR UPDATE WAIT 2" or " LOCK IN SHARE MODE NOWAIT".
// ForNoKeyUpdate becomes FOR UPDATE; ForShare becomes LOCK IN SHARE MODE;
// WaitTimeout becomes WAIT n with n the Timeout rounded up to whole
// seconds, at least 1 and at most 31536000 (WAIT n is MariaDB syntax;
// MySQL 8 rejects it). It returns lock.Validate's error (matching
// concurkit.ErrInvalidArgument) for an invalid lock.
func Clause(lock pessimistic.Lock) (string, error) {
	if err := lock.Validate(); err != nil {
		return "", err
	}
	s := " FOR UPDATE"
	if lock.Strength == pessimistic.ForShare {
		s = " LOCK IN SHARE MODE"
	}
	switch lock.Wait {
	case pessimistic.NoWait:
		s += " NOWAIT"
	case pessimistic.SkipLocked:
		s += " SKIP LOCKED"
	case pessimistic.WaitTimeout:
		s += " WAIT " + strconv.FormatInt(ceilSeconds(lock.Timeout), 10)
	}
	return s, nil
}

// Server limits of the lock-wait settings this package writes. A longer
// wait than the server can express is clamped: the wait may end earlier
// than asked, with ErrLockTimeout, never later.
const (
	// maxWaitSeconds is the largest MariaDB WAIT n: n sets the statement's
	// lock_wait_timeout, whose maximum is 31536000 s (365 days); larger
	// values are truncated by the server with a warning.
	maxWaitSeconds = 31536000
	// maxLockWaitTimeout is the maximum of innodb_lock_wait_timeout on
	// MariaDB 10.11 (100000000 s, about 3.2 years); MySQL 8 allows
	// 1073741824, so this value is valid on both.
	maxLockWaitTimeout = 100000000
)

// ceilSeconds rounds d up to whole seconds for MariaDB's WAIT n: at least
// 1 (WAIT 0 is NOWAIT), at most maxWaitSeconds.
func ceilSeconds(d time.Duration) int64 { return txn.CeilUnits(d, time.Second, maxWaitSeconds) }
