// Package durabilitypg checks, through pgx v5, whether a PostgreSQL server
// keeps the commits it acknowledges: see package durability.
//
// Call Check once at start-up on the pool the other packages will use:
//
//	if err := durabilitypg.Check(ctx, pool); errors.Is(err, durability.ErrNotDurable) {
//		log.Fatal(err) // or log it and accept the risk: *durability.Error lists each problem
//	}
//
// On a primary with standbys, a commit survives a failover only to a
// standby the commit waited for: synchronous_standby_names names it and
// synchronous_commit is on, remote_write or remote_apply for the session.
// Check reads pg_stat_replication and reports each standby that is not
// synchronous (async or potential), since a failover tool may promote it.
package durabilitypg
