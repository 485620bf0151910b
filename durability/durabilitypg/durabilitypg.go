package durabilitypg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/durability"
	"github.com/concurkit/concurkit/durability/internal/rules"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/pgxdb"
)

// DBTX is the pgx v5 query interface: *pgxpool.Pool, *pgxpool.Conn,
// *pgx.Conn and pgx.Tx satisfy it.
type DBTX = pgxdb.DBTX

const settingsSQL = `SELECT pg_is_in_recovery(), current_setting('fsync'), current_setting('synchronous_commit'),
	current_setting('synchronous_standby_names')`

const standbysSQL = `SELECT coalesce(application_name, ''), coalesce(sync_state, '') FROM pg_stat_replication ORDER BY 1`

// Check reads the settings of the session it runs on, and the standbys
// streaming from the server, and returns nil when an acknowledged commit
// survives a crash of the server and a failover to any connected standby;
// otherwise a *durability.Error (matching durability.ErrNotDurable) that
// lists each problem. A query that fails returns its error, wrapped, and
// not ErrNotDurable. Reading pg_stat_replication's sync_state needs
// pg_monitor (or a superuser): without it, each standby is reported as a
// possible failover loss.
func Check(ctx context.Context, db DBTX) error {
	if handle.IsNil(db) {
		return concurkit.InvalidArgumentError("durabilitypg: Check: nil db")
	}
	var s rules.Postgres
	if err := db.QueryRow(ctx, settingsSQL).Scan(&s.InRecovery, &s.Fsync, &s.SynchronousCommit, &s.SynchronousStandbyNames); err != nil {
		return fmt.Errorf("durabilitypg: read settings: %w", err)
	}
	rows, err := db.Query(ctx, standbysSQL)
	if err != nil {
		return fmt.Errorf("durabilitypg: read pg_stat_replication: %w", err)
	}
	s.Standbys, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (rules.Standby, error) {
		var sb rules.Standby
		err := r.Scan(&sb.Name, &sb.SyncState)
		return sb, err
	})
	if err != nil {
		return fmt.Errorf("durabilitypg: read pg_stat_replication: %w", err)
	}
	return durability.Result("postgresql", rules.PostgresProblems(s))
}
