package migrations

import "slices"

// Object is a database object that the toolkit set (Up) creates.
type Object struct {
	Kind string // "table" or "sequence"
	Name string // unqualified: created in the DSN's schema (PostgreSQL search_path) or database (MySQL)
	Use  string // what uses it, for people reading `concurkit migrate up`
}

// idempotencyKeys is idempotency.DefaultTable (0002_idempotency), named
// here so that this package does not import the idempotency packages.
const idempotencyKeys = "concurkit_idempotency_keys"

// Objects lists what Up creates for dialect d and Down drops, in creation
// order, besides the history table HistoryTable. It never includes a table
// of yours nor the examples set. On MySQL 8 the sequence is skipped (MySQL
// has no SEQUENCE objects; it is MariaDB-only). An unknown dialect is an
// error matching concurkit.ErrInvalidArgument.
//
// A test checks this list against the catalogue after Up on both servers.
func Objects(d Dialect) ([]Object, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	fences := Object{"table", DefaultFenceTable, "fence rows of fencedpg.Admit / fencedmysql.Admit (resource -> highest token admitted)"}
	sagas := Object{"table", "concurkit_sagas", "saga instances of package saga (sagapg.Store, sagamysql.Store): status, steps, outputs, lease"}
	if d == MySQL {
		return slices.Concat(
			// 0001
			[]Object{fences, {"sequence", DefaultFenceSequence, "MariaDB only: fencing tokens for distlock/redislock and redlock (fencedmysql.Sequence)"}},
			// 0002
			[]Object{{"table", idempotencyKeys, "idempotency keys and stored responses of idempotencymysql.Store"}},
			// 0003
			messaging("inboxmysql", "outboxmysql"),
			// 0004
			[]Object{sagas},
		), nil
	}
	return slices.Concat(
		// 0001
		[]Object{
			fences,
			{"sequence", DefaultFenceSequence, "fencing tokens for distlock/redislock and redlock (fencedpg.Sequence)"},
			{"sequence", DefaultLockSequence, "fencing tokens of distlock/pglock"},
		},
		// 0002
		[]Object{{"table", idempotencyKeys, "idempotency keys and stored responses of idempotencypg.Store"}},
		// 0003
		messaging("inboxpg", "outboxpg"),
		// 0004
		[]Object{sagas},
		// 0005, PostgreSQL only: MariaDB users of package ratelimit use Redis.
		[]Object{
			{"table", "concurkit_ratelimit_windows", "fixed-window counters of ratelimitpg (unlogged)"},
			{"table", "concurkit_ratelimit_gcra", "GCRA arrival times of ratelimitpg (unlogged)"},
		},
		// 0006, PostgreSQL only for now.
		[]Object{{"table", "concurkit_elections", "leader-election board of electionpg.Board: the latest leader's term and value per election"}},
	), nil
}

// messaging lists the tables of migration 0003 (packages inbox and
// outbox; their names are inbox.DefaultTable, inbox.DefaultSequenceTable
// and outbox.DefaultTable, which a test of those packages checks).
func messaging(inbox, outbox string) []Object {
	return []Object{
		{"table", "concurkit_inbox", "processed message ids per consumer (" + inbox + ".Handle), reaped after the dedup window"},
		{"table", "concurkit_inbox_sequences", "highest sequence applied per (consumer, producer) (" + inbox + ".HandleSequence)"},
		{"table", "concurkit_outbox", "events written in business transactions (" + outbox + ".Add), published by outbox.Relay"},
	}
}
