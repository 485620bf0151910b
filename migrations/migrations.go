package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/redact"
)

// Dialect names a SQL dialect.
type Dialect string

// The supported dialects.
const (
	Postgres Dialect = "postgres" // PostgreSQL 12+
	MySQL    Dialect = "mysql"    // MariaDB 10.6+ and MySQL 8 (no SEQUENCE objects on MySQL 8)
)

// The golang-migrate history tables of the two embedded sets. Neither is
// golang-migrate's default "schema_migrations", so a service's own
// migration history in the same schema or database is never read, changed
// or locked by concurkit's (golang-migrate's advisory lock is keyed by the
// history table too), and the two can be applied in either order.
const (
	// HistoryTable records the toolkit set applied by Up, Down and Version.
	HistoryTable = "concurkit_schema_migrations"
	// ExamplesHistoryTable records the examples set applied by UpExamples
	// and DownExamples.
	ExamplesHistoryTable = "concurkit_examples_schema_migrations"
	// defaultHistoryTable is golang-migrate's own default, used by UpFS and
	// DownFS for the caller's files.
	defaultHistoryTable = "schema_migrations"
)

// The two embedded sets: toolkit/ holds concurkit's own objects (what a
// service adopts), examples/ the demo tables of the tests, demo and bench.
//
//go:embed postgres/toolkit/*.sql postgres/examples/*.sql mysql/toolkit/*.sql mysql/examples/*.sql
var files embed.FS

// set is one of the two embedded migration sets.
type set struct {
	dir     string // toolkit or examples
	history string // its golang-migrate history table
}

var (
	toolkit  = set{dir: "toolkit", history: HistoryTable}
	examples = set{dir: "examples", history: ExamplesHistoryTable}
)

func (s set) fs(d Dialect) (fs.FS, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return fs.Sub(files, string(d)+"/"+s.dir)
}

// check reports whether d is a supported dialect.
func (d Dialect) check() error {
	switch d {
	case Postgres, MySQL:
		return nil
	}
	return fmt.Errorf("%w: migrations: unknown dialect %q (want %q or %q)", concurkit.ErrInvalidArgument, d, Postgres, MySQL)
}

// ParseDialect returns the Dialect named s ("postgres" or "mysql"; for
// MariaDB use "mysql"), or an error matching concurkit.ErrInvalidArgument.
func ParseDialect(s string) (Dialect, error) {
	d := Dialect(s)
	return d, d.check()
}

// FS returns the toolkit set of dialect d: the migration files Up applies,
// named as golang-migrate expects ({version}_{title}.up.sql / .down.sql),
// for copying into a service's own migration directory. An unknown dialect
// is an error matching concurkit.ErrInvalidArgument.
func FS(d Dialect) (fs.FS, error) { return toolkit.fs(d) }

// ExamplesFS returns the examples set of dialect d (the inventory,
// counters and jobs tables of concurkit's tests, demo and benchmarks).
func ExamplesFS(d Dialect) (fs.FS, error) { return examples.fs(d) }

// Up applies every pending migration of the toolkit set (see Objects) to
// the database at dsn, recording them in HistoryTable. It creates only
// concurkit's own objects, never alters a table of yours, and neither reads
// nor writes golang-migrate's default history table schema_migrations, so a
// service's own migrations and these apply in either order.
//
// For Postgres, dsn is a postgres:// or postgresql:// URL (a search_path
// parameter selects the schema; reserved characters in the user name and
// password percent-encoded); for MySQL it is a go-sql-driver DSN such as
// "root@tcp(127.0.0.1:3306)/app". An x-migrations-table parameter in dsn is
// replaced by HistoryTable. Having nothing to apply is not an error. When
// ctx ends, the running migration finishes and Up returns ctx.Err().
//
// A bad dialect or DSN is an error matching concurkit.ErrInvalidArgument,
// returned before connecting. Errors never show the DSN's password.
func Up(ctx context.Context, d Dialect, dsn string) error {
	return toolkit.run(ctx, d, dsn, (*migrate.Migrate).Up)
}

// Down rolls back every applied migration of the toolkit set, dropping
// concurkit's objects with the fence rows and token positions they hold
// (tokens minted afterwards start at 1 again). It leaves every other table,
// and the schema_migrations history, alone. See Up for dsn and errors.
func Down(ctx context.Context, d Dialect, dsn string) error {
	return toolkit.run(ctx, d, dsn, (*migrate.Migrate).Down)
}

// Version reports the toolkit set's current version in HistoryTable and
// whether its last migration failed half-way (dirty). A database with none
// of it applied reports version 0. See Up for dsn and errors.
func Version(ctx context.Context, d Dialect, dsn string) (version uint, dirty bool, err error) {
	err = toolkit.run(ctx, d, dsn, func(m *migrate.Migrate) error {
		version, dirty, err = m.Version()
		if errors.Is(err, migrate.ErrNilVersion) {
			version, dirty, err = 0, false, nil
		}
		return err
	})
	return version, dirty, err
}

// UpExamples applies the examples set (the tables inventory, counters and
// jobs used by concurkit's tests, demo and benchmarks), recording it in
// ExamplesHistoryTable. A service adopting concurkit does not need it. See
// Up for dsn and errors.
func UpExamples(ctx context.Context, d Dialect, dsn string) error {
	return examples.run(ctx, d, dsn, (*migrate.Migrate).Up)
}

// DownExamples rolls back the examples set, dropping its tables. See Up.
func DownExamples(ctx context.Context, d Dialect, dsn string) error {
	return examples.run(ctx, d, dsn, (*migrate.Migrate).Down)
}

// UpFS applies the golang-migrate files in fsys (for example a directory
// of templates written by Template, opened with os.DirFS) to the database
// at dsn. Like golang-migrate, it records them in schema_migrations, or in
// the table named by an x-migrations-table parameter of dsn (which may not
// be HistoryTable or ExamplesHistoryTable: those belong to concurkit's own
// sets). See Up for dsn, cancellation and errors; a nil fsys is an error
// matching concurkit.ErrInvalidArgument.
func UpFS(ctx context.Context, d Dialect, fsys fs.FS, dsn string) error {
	return runFS(ctx, d, fsys, dsn, "", (*migrate.Migrate).Up)
}

// DownFS rolls back the migrations in fsys. See UpFS.
func DownFS(ctx context.Context, d Dialect, fsys fs.FS, dsn string) error {
	return runFS(ctx, d, fsys, dsn, "", (*migrate.Migrate).Down)
}

func (s set) run(ctx context.Context, d Dialect, dsn string, op func(*migrate.Migrate) error) error {
	fsys, err := s.fs(d)
	if err != nil {
		return err
	}
	return runFS(ctx, d, fsys, dsn, s.history, op)
}

// runFS runs op over the migrations in fsys, with history as the
// golang-migrate history table ("" = the DSN's x-migrations-table or
// golang-migrate's default). Every error it returns has the DSN's password
// hidden: golang-migrate and the drivers may quote the URL they were given.
func runFS(ctx context.Context, d Dialect, fsys fs.FS, dsn, history string, op func(*migrate.Migrate) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.check(); err != nil {
		return err
	}
	if fsys == nil {
		return fmt.Errorf("%w: migrations: nil file system", concurkit.ErrInvalidArgument)
	}
	if err := d.linked(); err != nil {
		return err
	}
	dbURL, err := databaseURL(d, dsn, history)
	if err != nil {
		return redact.Error(err, dsn)
	}
	return redact.Error(migrateFS(ctx, fsys, dbURL, op), dsn, dbURL)
}

func migrateFS(ctx context.Context, fsys fs.FS, dbURL string, op func(*migrate.Migrate) error) (err error) {
	src, err := iofs.New(fsys, ".")
	if err != nil {
		return fmt.Errorf("migrations: read files: %w", err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, dbURL)
	if err != nil {
		return fmt.Errorf("migrations: connect: %w", err)
	}
	defer func() {
		srcErr, dbErr := m.Close()
		if err == nil {
			err = errors.Join(srcErr, dbErr)
		}
	}()
	stop := context.AfterFunc(ctx, func() {
		select {
		case m.GracefulStop <- true:
		default:
		}
	})
	defer stop()
	err = op(m)
	if errors.Is(err, migrate.ErrNoChange) {
		err = nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), fmt.Errorf("migrations: %w", err))
		}
		return fmt.Errorf("migrations: %w", err)
	}
	return ctx.Err()
}

// splitPGOptions parses libpq's options value ("-c a=b -c x=y" or
// "-ca=b") into settings. Other command-line switches are an error.
func splitPGOptions(opts string) (map[string]string, error) {
	out := map[string]string{}
	fields := strings.Fields(opts)
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		switch {
		case f == "-c" && i+1 < len(fields):
			i++
			f = fields[i]
		case strings.HasPrefix(f, "-c") && len(f) > 2:
			f = f[2:]
		case strings.HasPrefix(f, "--") && strings.Contains(f, "="):
			f = f[2:]
		default:
			return nil, fmt.Errorf("%w: migrations: unsupported postgres options %q in the DSN (only -c name=value)", concurkit.ErrInvalidArgument, opts)
		}
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: migrations: malformed postgres option %q in the DSN", concurkit.ErrInvalidArgument, f)
		}
		out[strings.ReplaceAll(k, "-", "_")] = v
	}
	return out, nil
}

// historyParams are golang-migrate's parameters that choose the history
// table; a toolkit or examples run replaces them with its own table.
var historyParams = []string{"x-migrations-table", "x-migrations-table-quoted"}

// checkHistory rejects an x-migrations-table that names one of concurkit's
// own history tables for the caller's files (UpFS, DownFS): mixing them
// would make Up skip or fail on the toolkit set.
func checkHistory(table string) error {
	t := strings.ToLower(strings.Trim(table, "\"`"))
	if i := strings.LastIndex(t, "."); i >= 0 {
		t = strings.Trim(t[i+1:], "\"`")
	}
	if t == HistoryTable || t == ExamplesHistoryTable {
		return fmt.Errorf("%w: migrations: x-migrations-table %q is concurkit's own history table; give your migrations their own", concurkit.ErrInvalidArgument, table)
	}
	return nil
}

// databaseURL turns a user DSN into the URL golang-migrate's driver wants,
// with history as the history table ("" = leave the DSN's choice).
func databaseURL(d Dialect, dsn, history string) (string, error) {
	if strings.TrimSpace(dsn) == "" {
		return "", fmt.Errorf("%w: migrations: empty DSN", concurkit.ErrInvalidArgument)
	}
	switch d {
	case Postgres:
		u, err := url.Parse(dsn)
		if err != nil {
			// url.Parse's message quotes the URL and pieces of it
			// (a password with a raw '/' ends the host early: "invalid
			// port"), so it is not passed on.
			return "", fmt.Errorf("%w: migrations: cannot parse the postgres URL %s (percent-encode '@', ':', '/', '?', '#' and '%%' in the user name and password)",
				concurkit.ErrInvalidArgument, redact.DSN(dsn))
		}
		switch u.Scheme {
		case "postgres", "postgresql", "pgx5":
		default:
			return "", fmt.Errorf("%w: migrations: a postgres URL starts with postgres://, got scheme %q", concurkit.ErrInvalidArgument, u.Scheme)
		}
		u.Scheme = "pgx5"
		q := u.Query()
		if opts := q.Get("options"); opts != "" {
			// golang-migrate re-encodes the query string, turning the
			// spaces of libpq's "options=-c name=value" into '+', which
			// the server then rejects. pgx sends every unknown URL
			// parameter as a run-time setting, so pass each -c setting as
			// its own parameter instead.
			rest, err := splitPGOptions(opts)
			if err != nil {
				return "", err
			}
			for k, v := range rest {
				q.Set(k, v)
			}
			q.Del("options")
		}
		if history != "" {
			for _, p := range historyParams {
				q.Del(p)
			}
			q.Set("x-migrations-table", history)
		} else if err := checkHistory(q.Get("x-migrations-table")); err != nil {
			return "", err
		}
		u.RawQuery = q.Encode()
		return u.String(), nil
	case MySQL:
		dsn = strings.TrimPrefix(dsn, "mysql://")
		// go-sql-driver's DSN: [user[:password]@][net[(addr)]]/dbname[?params].
		// Its parameters follow the first '?' after the last '/' (a
		// password may hold either). The DSN is edited as text rather
		// than through mysql.ParseDSN, which rejects the tls=custom that
		// golang-migrate's x-tls-* parameters register later.
		slash := strings.LastIndexByte(dsn, '/')
		if slash < 0 {
			return "", fmt.Errorf("%w: migrations: a MySQL DSN needs a '/' before the database name, as in user@tcp(host:3306)/app", concurkit.ErrInvalidArgument)
		}
		base, query := dsn, ""
		if q := strings.IndexByte(dsn[slash:], '?'); q >= 0 {
			base, query = dsn[:slash+q], dsn[slash+q+1:]
		}
		var params []string
		for p := range strings.SplitSeq(query, "&") {
			k, v, _ := strings.Cut(p, "=")
			switch {
			case p == "", k == "multiStatements":
				continue // set below: the files hold several statements
			case history != "" && (k == historyParams[0] || k == historyParams[1]):
				continue
			case history == "" && k == historyParams[0]:
				t, err := url.QueryUnescape(v)
				if err != nil {
					t = v
				}
				if err := checkHistory(t); err != nil {
					return "", err
				}
			}
			params = append(params, p)
		}
		params = append(params, "multiStatements=true")
		if history != "" {
			params = append(params, "x-migrations-table="+url.QueryEscape(history))
		}
		return "mysql://" + base + "?" + strings.Join(params, "&"), nil
	}
	return "", d.check()
}

// ErrDriverNotLinked is returned, before connecting, by the functions that
// run migrations when the dialect's driver package is not linked into the
// program: import migrations/migrationspg for Postgres or
// migrations/migrationsmysql for MySQL (for its side effect).
var ErrDriverNotLinked = errors.New("migrations: driver not linked")

// linked reports whether golang-migrate's driver for d is registered, and
// names the package that registers it when not.
func (d Dialect) linked() error {
	scheme, pkg := "pgx5", "migrationspg"
	if d == MySQL {
		scheme, pkg = "mysql", "migrationsmysql"
	}
	if slices.Contains(database.List(), scheme) {
		return nil
	}
	return fmt.Errorf("%w: %s: import _ \"github.com/concurkit/concurkit/migrations/%s\"", ErrDriverNotLinked, d, pkg)
}
