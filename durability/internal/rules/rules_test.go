package rules

import (
	"slices"
	"testing"

	"github.com/concurkit/concurkit/durability"
)

// settingsOf lists the problems as "loss setting" pairs, in order.
func settingsOf(ps []durability.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Loss.String()+" "+p.Setting)
	}
	return out
}

func TestPostgresProblems(t *testing.T) {
	durable := Postgres{Fsync: "on", SynchronousCommit: "on"}
	withStandbys := func(s Postgres, names string, sb ...Standby) Postgres {
		s.SynchronousStandbyNames, s.Standbys = names, sb
		return s
	}
	set := func(s Postgres, f func(*Postgres)) Postgres { f(&s); return s }
	for _, tc := range []struct {
		name string
		s    Postgres
		want []string
	}{
		{"single server, durable", durable, nil},
		{"fsync off", set(durable, func(s *Postgres) { s.Fsync = "off" }), []string{"crash fsync"}},
		{"synchronous_commit off", set(durable, func(s *Postgres) { s.SynchronousCommit = "off" }), []string{"crash synchronous_commit"}},
		{"synchronous_commit local, no standby", set(durable, func(s *Postgres) { s.SynchronousCommit = "local" }), nil},
		{"remote_write waits for the standby", withStandbys(set(durable, func(s *Postgres) { s.SynchronousCommit = "remote_write" }), "FIRST 1 (s1)", Standby{"s1", "sync"}), nil},
		{"a standby", set(durable, func(s *Postgres) { s.InRecovery = true }), []string{"not writable pg_is_in_recovery()"}},
		{"one sync standby", withStandbys(durable, "FIRST 1 (s1)", Standby{"s1", "sync"}), nil},
		{"quorum standbys", withStandbys(durable, "ANY 1 (s1, s2)", Standby{"s1", "quorum"}, Standby{"s2", "quorum"}), nil},
		{"sync and async standby", withStandbys(durable, "FIRST 1 (s1)", Standby{"s1", "sync"}, Standby{"s2", "async"}), []string{"failover standby s2"}},
		{"potential standby", withStandbys(durable, "FIRST 1 (s1, s2)", Standby{"s1", "sync"}, Standby{"s2", "potential"}), []string{"failover standby s2"}},
		{"async only", withStandbys(durable, "", Standby{"s1", "async"}), []string{"failover standby s1"}},
		{"local does not wait", withStandbys(set(durable, func(s *Postgres) { s.SynchronousCommit = "local" }), "FIRST 1 (s1)", Standby{"s1", "sync"}), []string{"failover standby s1"}},
		{"off: crash and failover", withStandbys(set(durable, func(s *Postgres) { s.SynchronousCommit = "off" }), "FIRST 1 (s1)", Standby{"s1", "sync"}), []string{"crash synchronous_commit", "failover standby s1"}},
		{"hidden state", withStandbys(durable, "FIRST 1 (s1)", Standby{"", ""}), []string{"failover standby (unnamed)"}},
	} {
		if got := settingsOf(PostgresProblems(tc.s)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: problems %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestMySQLProblems(t *testing.T) {
	single := MySQL{FlushLogAtTrxCommit: "1", Replicas: -1}
	galera := MySQL{Galera: true, WsrepReady: "ON", ClusterStatus: "Primary", FlushLogAtTrxCommit: "1", Replicas: -1}
	set := func(s MySQL, f func(*MySQL)) MySQL { f(&s); return s }
	for _, tc := range []struct {
		name string
		s    MySQL
		want []string
	}{
		{"single server, durable", single, nil},
		{"flush 0", set(single, func(s *MySQL) { s.FlushLogAtTrxCommit = "0" }), []string{"crash innodb_flush_log_at_trx_commit"}},
		{"flush 2", set(single, func(s *MySQL) { s.FlushLogAtTrxCommit = "2" }), []string{"crash innodb_flush_log_at_trx_commit"}},
		{"read only", set(single, func(s *MySQL) { s.ReadOnly = true }), []string{"not writable read_only"}},
		{"async replicas", set(single, func(s *MySQL) { s.Replicas = 2 }), []string{"failover replicas"}},
		{"semi-sync replicas", set(single, func(s *MySQL) { s.Replicas, s.SemiSync = 2, true }), nil},
		{"replicas not listable", single, nil},
		{"galera, flush 1", galera, nil},
		{"galera, flush 2 (its documentation's advice)", set(galera, func(s *MySQL) { s.FlushLogAtTrxCommit = "2" }), []string{"crash innodb_flush_log_at_trx_commit"}},
		{"galera node not ready", set(galera, func(s *MySQL) { s.WsrepReady = "OFF" }), []string{"not writable wsrep_ready"}},
		{"galera non-primary", set(galera, func(s *MySQL) { s.ClusterStatus = "non-Primary" }), []string{"not writable wsrep_cluster_status"}},
	} {
		if got := settingsOf(MySQLProblems(tc.s)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: problems %q, want %q", tc.name, got, tc.want)
		}
	}
}
