// Package migrationspg links the PostgreSQL driver of package migrations
// (golang-migrate's pgx v5 driver), the way a database/sql driver is
// linked: import it for its side effect wherever migrations.Up, Down,
// Version, UpExamples, DownExamples, UpFS or DownFS run against
// PostgreSQL.
//
//	import _ "github.com/concurkit/concurkit/migrations/migrationspg"
//
// Without it those calls with migrations.Postgres fail with an error that
// names this package; the split keeps the MySQL driver out of a
// PostgreSQL service's build (and pgx out of a MySQL one).
package migrationspg

import _ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
