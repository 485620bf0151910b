package mysqlcancel

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"
	"runtime"
	"sync"
	"time"
	"unsafe"
	"weak"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqldb"
	"github.com/concurkit/concurkit/internal/sqlerr"
)

// Budget bounds how long Exec keeps trying to stop a statement on the
// server after ctx ended (KILL QUERY included) before it closes the
// connection and reports the outcome unknown.
const Budget = 3 * time.Second

const (
	killQuery         = "KILL QUERY ?"
	connectionIDQuery = "SELECT CONNECTION_ID()"
)

// maxBadConnAttempts mirrors database/sql: a pooled connection that the
// driver finds dead before sending anything (driver.ErrBadConn) is
// replaced and the statement tried again.
const maxBadConnAttempts = 3

// Exec runs query (a write) on db like db.ExecContext and returns its
// result, with the cancellation guarantees of the package documentation:
// when ctx ends during the call the error matches ctx.Err(), and it is a
// *sqlerr.AmbiguousCommitError when the statement may still have
// committed. A statement that finished before it could be stopped returns
// its result and no error.
func Exec(ctx context.Context, db sqldb.DBTX, query string, args ...any) (sql.Result, error) {
	res, err := exec(ctx, db, Budget, query, args)
	// Deadlocks and MariaDB 1020 become recognisable to retry.IsRetryable,
	// which links no driver.
	return res, mysqlerr.Mark(err)
}

func exec(ctx context.Context, db sqldb.DBTX, budget time.Duration, query string, args []any) (sql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nothing sent
	}
	switch h := db.(type) {
	case *sql.DB:
		for attempt := 1; ; attempt++ {
			res, err := execDB(ctx, h, budget, query, args)
			if !errors.Is(err, driver.ErrBadConn) || attempt == maxBadConnAttempts || ctx.Err() != nil {
				return res, err
			}
		}
	case *sql.Tx:
		res, err := h.ExecContext(ctx, query, args...)
		return res, joinCtx(ctx, err)
	default:
		res, err := db.ExecContext(ctx, query, args...)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil && !answered(err) || errors.Is(err, mysql.ErrInvalidConn) {
			return nil, &sqlerr.AmbiguousCommitError{Err: joinCtx(ctx, err)}
		}
		return nil, joinCtx(ctx, err)
	}
}

// stopped is what stopStatement did.
type stopped struct {
	abandoned bool  // the connection was closed with the statement in flight
	err       error // the last KILL's error
}

// execDB runs the statement on one pooled connection of db, stopping it
// on the server if ctx ends first.
func execDB(ctx context.Context, db *sql.DB, budget time.Duration, query string, args []any) (_ sql.Result, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return execOn(ctx, db, conn, budget, query, args)
}

// ExecOn is Exec with the guarantees of a *sql.DB for a statement run on
// conn, a connection the caller took from db (db.Conn): the caller's next
// statement on conn runs on the same session (on a Galera cluster, the
// same node), so it sees what this one wrote. Deadlocks and MariaDB's
// 1020 are marked as Exec marks them. After a statement stopped by KILL,
// conn is spoiled: database/sql closes it when it is given back, and the
// statements sent on it before that fail.
func ExecOn(ctx context.Context, db *sql.DB, conn *sql.Conn, query string, args ...any) (sql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nothing sent
	}
	res, err := execOn(ctx, db, conn, Budget, query, args)
	return res, mysqlerr.Mark(err)
}

// execOn runs the statement on conn, stopping it on the server through
// db's pool if ctx ends first.
func execOn(ctx context.Context, db *sql.DB, conn *sql.Conn, budget time.Duration, query string, args []any) (_ sql.Result, err error) {
	discard := false
	defer func() {
		if discard {
			// Returning driver.ErrBadConn from Raw makes database/sql close
			// the connection instead of pooling it: after a KILL its state
			// is not worth reasoning about.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	id, err := connectionID(ctx, conn)
	if err != nil {
		return nil, err // the write was not sent
	}
	// The driver closes the socket when its context ends; this one ends
	// only when stopStatement gives up on the server.
	stmtCtx, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	replied := make(chan struct{})
	result := make(chan stopped, 1)
	stop := context.AfterFunc(ctx, func() {
		result <- stopStatement(ctx, db, id, budget, replied, abandon)
	})
	res, err := conn.ExecContext(stmtCtx, query, args...)
	close(replied)
	if stop() {
		// ctx did not end during the statement: its own answer. A
		// connection lost after the statement was sent leaves an
		// autocommit write's outcome unknown.
		if errors.Is(err, mysql.ErrInvalidConn) {
			return nil, &sqlerr.AmbiguousCommitError{Err: err}
		}
		return res, err
	}
	// stopStatement ran (or runs): wait for it, so that no KILL for this
	// thread is still on its way when the connection goes back.
	s := <-result
	discard = true
	switch {
	case err == nil:
		return res, nil // finished before the KILL: applied
	case answered(err):
		// The server answered with an error (1317 when the KILL stopped
		// it): the statement was rolled back.
		return nil, joinCtx(ctx, err)
	case s.abandoned || errors.Is(err, mysql.ErrInvalidConn):
		return nil, &sqlerr.AmbiguousCommitError{Err: errors.Join(ctx.Err(), err, s.err)}
	}
	return nil, joinCtx(ctx, err) // failed before reaching the server
}

// stopStatement runs once ctx has ended while the statement may be in
// flight on the connection with thread id id. It sends KILL QUERY id
// through db's pool (another connection) and waits for the statement to
// answer (replied closed), repeating the KILL with backoff: a KILL that
// lands between the driver's prepare and execute packets finds the thread
// idle and is forgotten. If no answer arrives within budget it abandons
// the connection (its socket is closed) and reports so.
func stopStatement(ctx context.Context, db *sql.DB, id uint64, budget time.Duration, replied <-chan struct{}, abandon func()) stopped {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	var s stopped
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
		select {
		case <-replied:
			return s
		default:
		}
		if _, err := db.ExecContext(kctx, killQuery, id); err != nil {
			s.err = err
		}
		t := time.NewTimer(wait)
		select {
		case <-replied:
			t.Stop()
			return s
		case <-kctx.Done():
			t.Stop()
			abandon()
			s.abandoned = true
			return s
		case <-t.C:
		}
	}
}

// answered reports whether err is the server's answer to the statement,
// which means an autocommit statement was rolled back.
func answered(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me)
}

// joinCtx makes err match ctx.Err() when ctx has ended.
func joinCtx(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(err, cerr)
	}
	return err
}

// ids caches each driver connection's server thread id (CONNECTION_ID()),
// which never changes for the life of the connection. It is keyed by a
// weak pointer to the driver's connection object, so it does not keep
// closed connections alive, and each entry is deleted by a cleanup when
// its connection is garbage collected: the cache holds one entry per live
// connection. It is package state because Exec has no long-lived handle
// of its own to hang it on; a miss only costs one round trip.
var ids sync.Map // weak.Pointer[byte] → uint64

// connectionID returns the thread id of conn's driver connection, asking
// the server only the first time it meets that driver connection.
func connectionID(ctx context.Context, conn *sql.Conn) (uint64, error) {
	var p unsafe.Pointer
	err := conn.Raw(func(dc any) error {
		// go-sql-driver's connection type is unexported: its address is
		// its identity.
		if v := reflect.ValueOf(dc); v.Kind() == reflect.Pointer && !v.IsNil() {
			p = v.UnsafePointer()
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var key weak.Pointer[byte]
	if p != nil {
		key = weak.Make((*byte)(p))
		if id, ok := ids.Load(key); ok {
			return id.(uint64), nil
		}
	}
	var id uint64
	if err := conn.QueryRowContext(ctx, connectionIDQuery).Scan(&id); err != nil {
		return 0, joinCtx(ctx, err)
	}
	if p != nil {
		if _, loaded := ids.LoadOrStore(key, id); !loaded {
			runtime.AddCleanup((*byte)(p), func(k weak.Pointer[byte]) { ids.Delete(k) }, key)
		}
	}
	return id, nil
}
