// Package outboxmysql is the MariaDB/MySQL (database/sql and
// github.com/go-sql-driver/mysql) adapter of package outbox: Add writes a
// message in the business transaction, and *Store is the outbox.Source a
// Relay claims batches from (FOR UPDATE SKIP LOCKED, MariaDB 10.6+ or
// MySQL 8, in a READ COMMITTED transaction held while the publisher runs,
// so that producers' inserts never wait on the relay's gap locks), with
// Reap for published rows and Pending for the backlog. The table
// concurkit_outbox is created by the toolkit migrations. Types and
// semantics are the core's: see package outbox. This package never links
// pgx or the AWS SDK.
//
// # Galera
//
// On a MariaDB Galera cluster every committed message is still published
// at least once and none is lost, but relays on different nodes publish
// many duplicates: SKIP LOCKED skips only rows locked on the relay's own
// node, so relays on several nodes claim the same oldest rows and all
// publish them; the first to commit its mark wins, and the others' claims
// fail at COMMIT with 1213 (pessimistic.ErrDeadlock: a definite failure,
// their marks did not commit; Once returns it, Run backs off and claims
// again). Measured with six relays, batches of 10 and 400 messages: on
// three nodes 979 to 1,076 duplicate publishes (245–269 %, 139–226 claims
// lost); on one node none, unless a producer's insert replicated from
// another node aborts a relay's transaction (a brute-force abort, rare:
// one duplicate in a CI run). Producers may write on any node; run the
// relays against one node (a DSN or proxy route of their own), keeping a
// relay on another node only for failover, and consume with package inbox,
// which absorbs the duplicates (TestGaleraConcurrentRelays applies every
// effect once). No session setting is needed.
package outboxmysql
