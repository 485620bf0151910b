package migrations

// Object is a database object that the toolkit set (Up) creates.
type Object struct {
	Kind string // "table" or "sequence"
	Name string // unqualified: created in the DSN's schema (PostgreSQL search_path) or database (MySQL)
	Use  string // what uses it, for people reading `concurkit migrate up`
}

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
	sagas := Object{"table", "concurkit_sagas", "saga instances of package saga (sagapg.Store, sagamysql.Store): status, steps, outputs, lease"} // 0004_saga
	if d == MySQL {
		return []Object{
			fences,
			{"sequence", DefaultFenceSequence, "MariaDB only: fencing tokens for distlock/redislock and redlock (fencedmysql.Sequence)"},
			sagas,
		}, nil
	}
	return []Object{
		fences,
		{"sequence", DefaultFenceSequence, "fencing tokens for distlock/redislock and redlock (fencedpg.Sequence)"},
		{"sequence", DefaultLockSequence, "fencing tokens of distlock/pglock"},
		sagas,
	}, nil
}
