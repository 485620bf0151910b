package durabilitymysql

import (
	"context"
	"fmt"
	"strings"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/durability"
	"github.com/concurkit/concurkit/durability/internal/rules"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/mysqlerr"
	"github.com/concurkit/concurkit/internal/sqldb"
)

// DBTX is the database/sql query interface: *sql.DB, *sql.Conn and *sql.Tx
// satisfy it.
type DBTX = sqldb.DBTX

// Check reads the server's settings and returns nil when an acknowledged
// commit survives a crash of the server (or of a Galera node) and a
// failover to a connected replica; otherwise a *durability.Error (matching
// durability.ErrNotDurable) that lists each problem. A query that fails
// returns its error, wrapped, and not ErrNotDurable. Listing replicas
// (SHOW REPLICA HOSTS) needs the REPLICATION MASTER ADMIN privilege
// (MariaDB) or REPLICATION SLAVE (MySQL): without it, replicas are not
// checked.
func Check(ctx context.Context, db DBTX) error {
	if handle.IsNil(db) {
		return concurkit.InvalidArgumentError("durabilitymysql: Check: nil db")
	}
	vars, err := show(ctx, db, "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'wsrep_on', 'innodb_flush_log_at_trx_commit', 'rpl_semi_sync_master_enabled', 'rpl_semi_sync_source_enabled')")
	if err != nil {
		return err
	}
	s := rules.MySQL{
		ReadOnly:            vars["read_only"] == "ON",
		Galera:              vars["wsrep_on"] == "ON",
		FlushLogAtTrxCommit: vars["innodb_flush_log_at_trx_commit"],
		SemiSync:            vars["rpl_semi_sync_master_enabled"] == "ON" || vars["rpl_semi_sync_source_enabled"] == "ON",
		Replicas:            -1,
	}
	if s.Galera {
		st, err := show(ctx, db, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_cluster_status')")
		if err != nil {
			return err
		}
		s.WsrepReady, s.ClusterStatus = st["wsrep_ready"], st["wsrep_cluster_status"]
	} else {
		s.Replicas, err = replicas(ctx, db)
		if err != nil {
			return err
		}
	}
	return durability.Result("mysql", rules.MySQLProblems(s))
}

// show runs a SHOW … of (name, value) rows into a map.
func show(ctx context.Context, db DBTX, q string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("durabilitymysql: %s: %w", q[:strings.Index(q, " WHERE")], err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("durabilitymysql: %w", err)
		}
		out[strings.ToLower(k)] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durabilitymysql: %w", err)
	}
	return out, nil
}

// replicas counts the connected replicas, or returns -1 when the user may
// not list them.
func replicas(ctx context.Context, db DBTX) (int, error) {
	rows, err := db.QueryContext(ctx, "SHOW SLAVE HOSTS")
	if err != nil {
		if mysqlerr.Number(err) != 0 {
			return -1, nil // the server refused (1227, access denied): replicas not checked
		}
		return 0, fmt.Errorf("durabilitymysql: SHOW SLAVE HOSTS: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("durabilitymysql: SHOW SLAVE HOSTS: %w", err)
	}
	return n, nil
}
