// Package migrations ships the SQL schema concurkit needs, for PostgreSQL
// and MariaDB/MySQL, as golang-migrate files embedded in the binary, and a
// generator of migration templates for a service's own tables.
//
// # Drivers: link the one you use
//
// The package links no database driver. Import migrations/migrationspg
// (PostgreSQL) or migrations/migrationsmysql (MariaDB/MySQL) for its side
// effect, as with a database/sql driver, so a PostgreSQL service never
// builds the MySQL driver and the other way round; without it the
// functions that run migrations return ErrDriverNotLinked, naming the
// package to import. FS, Objects and Template need no driver.
//
// # Two sets, two history tables
//
// The embedded files form two separate sets, each with its own
// golang-migrate history table, and neither uses golang-migrate's default
// schema_migrations:
//
//   - The toolkit set (Up, Down, Version, FS) holds concurkit's own objects
//     and nothing else (see Objects): the fence table concurkit_fences
//     (fencedpg.Admit, fencedmysql.Admit) and the token sequences
//     concurkit_fence_token_seq (fencedpg.Sequence / fencedmysql.Sequence,
//     the token source of distlock/redislock and redlock) and, on
//     PostgreSQL, concurkit_lock_token_seq (distlock/pglock) (version 1);
//     the idempotency key table concurkit_idempotency_keys
//     (idempotencypg.Store, idempotencymysql.Store) (version 2); the
//     messaging tables concurkit_inbox and concurkit_inbox_sequences
//     (package inbox) and concurkit_outbox (package outbox) (version 3); the
//     saga instances concurkit_sagas (sagapg.Store, sagamysql.Store)
//     (version 4); on PostgreSQL only, the unlogged rate-limit tables
//     concurkit_ratelimit_windows and concurkit_ratelimit_gcra
//     (ratelimit/ratelimitpg, version 5); on PostgreSQL only, the
//     leader-election board concurkit_elections (electionpg.Board,
//     version 6). Its history table is
//     HistoryTable, concurkit_schema_migrations. It never creates, alters or
//     drops a table of yours. Future toolkit objects join this set as new
//     versions.
//   - The examples set (UpExamples, DownExamples, ExamplesFS) holds the demo
//     tables inventory, counters and jobs used by concurkit's own tests, the
//     demo and the benchmarks, with history table ExamplesHistoryTable.
//     A service does not need it.
//
// DynamoDB has no SQL schema: distlock/dynamolock and fenceddynamo create or
// expect their tables through the AWS API, not through this package.
//
// # Adopting concurkit in a service that already uses golang-migrate
//
// Because the toolkit set records itself in its own history table (and
// golang-migrate's advisory lock is keyed by that table), a schema or
// database whose schema_migrations already holds the service's migrations
// can apply concurkit's migrations and its own in either order, at any
// time: neither run sees the other's versions. Down rolls back only
// concurkit's objects; the service's tables and schema_migrations stay as
// they were. A test applies both orders on PostgreSQL and MariaDB.
//
// Three ways to adopt, from least to most control:
//
//  1. Call Up at start-up (or run `concurkit migrate up --dialect postgres
//     --dsn URL`), next to the service's own migrations.
//  2. Copy the files of FS(dialect) (migrations/postgres/toolkit/ or
//     migrations/mysql/toolkit/ in the source tree) into the service's
//     migration directory, renumbered after its own highest version, and
//     apply them with the service's tool and history table. Their
//     statements use IF NOT EXISTS, so a schema that already has the
//     objects (from Up, or created by hand) adopts them.
//  3. Generate exactly what the service needs with Template, or
//     `concurkit migrate template`, and commit the files with its own
//     migrations.
//
// The MySQL toolkit set applies on MariaDB 10.6+ and on MySQL 8: its token
// sequence is created inside a MariaDB executable comment (/*M!100300 … */)
// that MySQL 8, which has no SEQUENCE objects, reads as a comment.
//
// # Templates for a service's own tables
//
// Template writes an up and a down migration that add, as asked, an
// optimistic version column (BIGINT NOT NULL DEFAULT 1) and a fencing column
// (BIGINT NOT NULL DEFAULT 0) to an existing table in one ALTER TABLE, a
// fence table, and token sequences. The first statement is a lock-timeout
// guard (PostgreSQL SET lock_timeout, MySQL/MariaDB SET SESSION
// lock_wait_timeout; DefaultLockTimeout): an ALTER TABLE queues behind
// every open transaction on the table and every later query queues behind
// it, so on a busy table the migration fails fast instead of stalling the
// service; rerun it when the table is quieter. Versions are either a UTC
// timestamp (TimestampVersion) or the next sequential number of a
// directory (NextSequential). Copy the two files into the service's
// migration directory, or apply them with UpFS, which uses golang-migrate's
// default history table, like the service's own tool does.
//
// # Errors
//
// Bad input (an unknown dialect, an empty or unparsable DSN, a nil file
// system, invalid template options) is an error matching
// concurkit.ErrInvalidArgument, returned before any connection is made.
// Errors never show a DSN's password.
package migrations
