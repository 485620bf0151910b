// Package mysqlcancel runs MySQL/MariaDB writes so that the end of the
// caller's context stops them on the server, and says so when that cannot
// be confirmed.
//
// go-sql-driver/mysql reacts to a context that ends during a statement by
// closing the socket. The server does not notice until it next talks to
// the client: a statement queued behind a row lock keeps waiting and, in
// autocommit mode, commits once the lock is released — after the caller
// was told context.Canceled. Exec closes that hole:
//
//   - *sql.DB: the statement runs on a connection taken from the pool
//     (db.Conn) under a context the driver never sees cancelled, so the
//     socket stays open. When ctx ends, KILL QUERY <thread id> goes to the
//     server through another pooled connection, and Exec waits for the
//     statement's own answer, which is then authoritative: an error (1317
//     after the KILL) means the statement was rolled back, success means
//     it had finished first. Only if no answer arrives within Budget is
//     the socket closed and the outcome unknown. The thread id comes from
//     SELECT CONNECTION_ID(), asked once per driver connection and cached
//     (see connectionID), so the success path costs no extra round trip.
//   - *sql.Tx: nothing to do. If ctx ends, the driver closes the
//     connection; the server rolls back the open transaction when the
//     connection ends, and the Tx can no longer COMMIT, so the statement's
//     effect can never commit even if the server finishes it later.
//   - *sql.Conn and any other implementation: no second connection is
//     available to send KILL from, and autocommit may be on, so an error
//     caused by the end of ctx is reported as outcome unknown.
//
// "Outcome unknown" is a *sqlerr.AmbiguousCommitError whose cause matches
// ctx.Err().
package mysqlcancel
