// Package durabilitymysql checks, through database/sql, whether a MariaDB
// or MySQL server (or a Galera node) keeps the commits it acknowledges: see
// package durability.
//
// Call Check once at start-up on the pool the other packages will use:
//
//	if err := durabilitymysql.Check(ctx, db); errors.Is(err, durability.ErrNotDurable) {
//		log.Fatal(err) // or log it and accept the risk: *durability.Error lists each problem
//	}
//
// Check reads global variables and status only (SHOW GLOBAL VARIABLES,
// SHOW GLOBAL STATUS, SHOW SLAVE HOSTS). On a Galera node it checks that
// the node is ready and in the primary component, and that it flushes its
// redo log at each commit (a crash of every node at once loses the last
// commits otherwise). Reads on a Galera
// node may still not see a commit made on another node a moment ago
// (wsrep_sync_wait = 0, the default): that is not a durability problem and
// Check does not report it; the packages whose guarantees need a fresh
// read say so.
package durabilitymysql
