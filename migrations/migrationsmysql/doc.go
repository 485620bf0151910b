// Package migrationsmysql links the MariaDB/MySQL driver of package
// migrations (golang-migrate's mysql driver, on go-sql-driver/mysql), the
// way a database/sql driver is linked: import it for its side effect
// wherever migrations.Up, Down, Version, UpExamples, DownExamples, UpFS or
// DownFS run against MariaDB or MySQL.
//
//	import _ "github.com/concurkit/concurkit/migrations/migrationsmysql"
//
// Without it those calls with migrations.MySQL fail with an error that
// names this package; the split keeps pgx out of a MySQL service's build
// (and the MySQL driver out of a PostgreSQL one).
package migrationsmysql

import _ "github.com/golang-migrate/migrate/v4/database/mysql" // registers mysql://
