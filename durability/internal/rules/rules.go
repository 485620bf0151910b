// Package rules turns the settings the adapters read into durability
// problems: the logic of durabilitypg and durabilitymysql, once, without a
// driver.
package rules

import (
	"strconv"
	"strings"

	"github.com/concurkit/concurkit/durability"
)

// Standby is one row of PostgreSQL's pg_stat_replication.
type Standby struct {
	Name      string // application_name ("" when the role may not see it)
	SyncState string // async, potential, sync, quorum ("" when hidden)
}

// Postgres is what durabilitypg reads.
type Postgres struct {
	InRecovery              bool
	Fsync                   string
	SynchronousCommit       string
	SynchronousStandbyNames string
	Standbys                []Standby
}

// PostgresProblems returns the problems of s.
func PostgresProblems(s Postgres) []durability.Problem {
	var out []durability.Problem
	if s.InRecovery {
		out = append(out, durability.Problem{Setting: "pg_is_in_recovery()", Value: "true", Want: "false",
			Loss: durability.NotWritable, Detail: "the session is on a standby, which takes no writes"})
	}
	if s.Fsync == "off" {
		out = append(out, durability.Problem{Setting: "fsync", Value: s.Fsync, Want: "on",
			Loss: durability.Crash, Detail: "commits are not forced to disk: a crash can lose or corrupt them"})
	}
	if s.SynchronousCommit == "off" {
		out = append(out, durability.Problem{Setting: "synchronous_commit", Value: s.SynchronousCommit, Want: "on",
			Loss: durability.Crash, Detail: "a commit is acknowledged before its WAL is flushed: a crash loses the last ones"})
	}
	waitsForStandby := strings.TrimSpace(s.SynchronousStandbyNames) != "" &&
		s.SynchronousCommit != "off" && s.SynchronousCommit != "local"
	for _, sb := range s.Standbys {
		name := sb.Name
		if name == "" {
			name = "(unnamed)"
		}
		switch {
		case sb.SyncState == "":
			out = append(out, durability.Problem{Setting: "standby " + name, Value: "sync_state unknown", Want: "sync",
				Loss: durability.Failover, Detail: "the role may not read pg_stat_replication (grant pg_monitor): a standby that is not synchronous loses, when promoted, what it had not received"})
		case !waitsForStandby && (sb.SyncState == "sync" || sb.SyncState == "quorum"):
			out = append(out, durability.Problem{Setting: "standby " + name, Value: sb.SyncState + " (synchronous_commit = " + s.SynchronousCommit + ")", Want: "synchronous_commit on, remote_write or remote_apply",
				Loss: durability.Failover, Detail: "this session's commits do not wait for the standby: promoting it loses what it had not received"})
		case sb.SyncState == "async" || sb.SyncState == "potential":
			out = append(out, durability.Problem{Setting: "standby " + name, Value: sb.SyncState, Want: "sync",
				Loss: durability.Failover, Detail: "the standby streams asynchronously: promoting it loses the commits it had not received"})
		}
	}
	return out
}

// MySQL is what durabilitymysql reads.
type MySQL struct {
	ReadOnly bool
	// Galera: wsrep_on is ON.
	Galera        bool
	WsrepReady    string // wsrep_ready status
	ClusterStatus string // wsrep_cluster_status
	// FlushLogAtTrxCommit is innodb_flush_log_at_trx_commit.
	FlushLogAtTrxCommit string
	// Replicas is the number of replicas connected (SHOW REPLICA HOSTS);
	// -1 when the user may not list them.
	Replicas int
	// SemiSync is rpl_semi_sync_master_enabled (MariaDB) or
	// rpl_semi_sync_source_enabled (MySQL).
	SemiSync bool
}

// MySQLProblems returns the problems of s.
func MySQLProblems(s MySQL) []durability.Problem {
	var out []durability.Problem
	if s.ReadOnly {
		out = append(out, durability.Problem{Setting: "read_only", Value: "ON", Want: "OFF",
			Loss: durability.NotWritable, Detail: "the server takes no writes (a replica?)"})
	}
	if s.Galera {
		if s.WsrepReady != "ON" {
			out = append(out, durability.Problem{Setting: "wsrep_ready", Value: s.WsrepReady, Want: "ON",
				Loss: durability.NotWritable, Detail: "the Galera node does not accept queries"})
		}
		if s.ClusterStatus != "Primary" {
			out = append(out, durability.Problem{Setting: "wsrep_cluster_status", Value: s.ClusterStatus, Want: "Primary",
				Loss: durability.NotWritable, Detail: "the node is outside the primary component: it takes no writes"})
		}
	}
	if s.FlushLogAtTrxCommit != "1" {
		detail := "the redo log is not flushed at each commit: a crash loses the last acknowledged commits"
		if s.Galera {
			// Each commit reaches every node before it is acknowledged,
			// so one node's crash loses nothing; but a crash of every
			// node at once (a power cut) does: Jepsen's 2026 analysis of
			// Galera 12.1.2 lost acknowledged commits that way with the
			// flush setting Galera's documentation recommends (2).
			detail = "the redo log is not flushed at each commit: a crash of every node at once (a power cut) loses the last acknowledged commits"
		}
		out = append(out, durability.Problem{Setting: "innodb_flush_log_at_trx_commit", Value: s.FlushLogAtTrxCommit, Want: "1",
			Loss: durability.Crash, Detail: detail})
	}
	if !s.Galera && s.Replicas > 0 && !s.SemiSync {
		out = append(out, durability.Problem{Setting: "replicas", Value: strconv.Itoa(s.Replicas) + " asynchronous", Want: "semi-synchronous replication",
			Loss: durability.Failover, Detail: "commits are acknowledged before a replica has them: promoting one loses the commits it had not received"})
	}
	return out
}
