// Package fenced makes storage enforce fencing tokens, the rule that makes
// distributed locks safe.
//
// A lock with a time-to-live alone cannot guarantee mutual exclusion: a
// holder paused by garbage collection, a slow network or a clock jump can
// outlive its lease and write after another holder took over (Kleppmann,
// "How to do distributed locking", 2016). Every distlock lease therefore
// carries a Token that is strictly increasing in acquisition order, and
// every write guarded by this package is accepted only if its token is at
// least the highest token the storage has seen for that row or item, which
// it advances in the same statement (one round trip):
//
//	UPDATE t SET …, max_seen_token = $tok WHERE id = $key AND max_seen_token <= $tok
//
// Equal tokens pass (one holder may write many times); a lower token fails
// with ErrStaleToken, so a holder that lost its lock can never overwrite its
// successor's data.
//
// The package provides:
//
//   - Sources of tokens for locks that cannot mint their own (single Redis,
//     Redlock): PostgresSequence (nextval), MySQLSequence (a MariaDB
//     SEQUENCE object) and DynamoDBCounter (an atomic ADD).
//   - Guarded writes on a caller's table: WritePostgres / UpdatePostgres
//     (pgx v5), WriteMySQL / UpdateMySQL (database/sql, MariaDB/MySQL) and
//     PutDynamoDB (a ConditionExpression).
//   - Admit and AdmitMySQL: a fence row checked and advanced inside the
//     caller's transaction, to guard side effects on resources that live
//     elsewhere (send the e-mail only if the transaction that admitted the
//     token commits).
//
// Where a MySQL/MariaDB write changed nothing, the token is read back with
// a locking read: inside a REPEATABLE READ transaction a plain SELECT would
// read the transaction's old snapshot and could mistake a successor's
// newer token for the caller's own. Given a *sql.DB, a MySQL write whose
// context ends while it waits for a lock is stopped on the server (KILL
// QUERY) before the call returns; where that cannot be confirmed the
// error is *AmbiguousCommitError. In PostgreSQL a REPEATABLE READ
// transaction that meets a successor's newer row gets a serialization
// failure (SQLSTATE 40001) instead of ErrStaleToken: retry the
// transaction, and its fresh snapshot then gets ErrStaleToken.
//
// A nil handle, typed nil pointers included, is ErrNilHandle, returned
// before any I/O. Identifiers (table, column, sequence names) are
// validated and quoted; values are always bind parameters.
package fenced
