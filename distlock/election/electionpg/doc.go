// Package electionpg keeps the proclamations of package election's
// leaders on PostgreSQL (pgx v5): Board implements election.Board on the
// table concurkit_elections of the toolkit migrations (migrations.Up,
// version 6), one row per election, written with fencedpg's guarded
// upsert so that a deposed leader's proclamation is refused.
//
// The board is independent of the lock backend: an election whose leader
// is chosen by etcd or ZooKeeper can keep its board on PostgreSQL.
package electionpg
