package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/mysql"  // registers mysql://
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/concurkit/concurkit/internal/redact"
)

// Dialect names a SQL dialect.
type Dialect string

// The supported dialects.
const (
	Postgres Dialect = "postgres"
	MySQL    Dialect = "mysql" // MySQL 8 and MariaDB 10.6+
)

// ErrUnknownDialect is returned for a dialect other than Postgres or MySQL.
var ErrUnknownDialect = errors.New("migrations: unknown dialect")

// ErrInvalidDSN is returned for an empty DSN, a PostgreSQL URL that cannot
// be parsed or has another scheme, or unsupported libpq options. Its
// message shows the DSN with the password hidden.
var ErrInvalidDSN = errors.New("migrations: invalid DSN")

//go:embed postgres/*.sql mysql/*.sql
var files embed.FS

// FS returns the migration files of dialect d, named as golang-migrate
// expects ({version}_{title}.up.sql / .down.sql).
func FS(d Dialect) (fs.FS, error) {
	switch d {
	case Postgres, MySQL:
		return fs.Sub(files, string(d))
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownDialect, d)
}

// Up applies every pending migration of dialect d to the database at dsn.
// For Postgres, dsn is a postgres:// or postgresql:// URL (a search_path
// parameter selects the schema; reserved characters in the user name and
// password percent-encoded); for MySQL it is a go-sql-driver DSN such as
// "root@tcp(127.0.0.1:3306)/app". Having nothing to apply is not an error.
// When ctx ends, the running migration finishes and Up returns ctx.Err().
// Errors never show the DSN's password (see ErrInvalidDSN).
func Up(ctx context.Context, d Dialect, dsn string) error {
	return run(ctx, d, dsn, func(m *migrate.Migrate) error { return m.Up() })
}

// Down rolls back every applied migration of dialect d. See Up for dsn.
func Down(ctx context.Context, d Dialect, dsn string) error {
	return run(ctx, d, dsn, func(m *migrate.Migrate) error { return m.Down() })
}

// Version reports the current migration version and whether the last
// migration failed half-way (dirty). A database with no migration applied
// reports version 0.
func Version(ctx context.Context, d Dialect, dsn string) (version uint, dirty bool, err error) {
	err = run(ctx, d, dsn, func(m *migrate.Migrate) error {
		version, dirty, err = m.Version()
		if errors.Is(err, migrate.ErrNilVersion) {
			version, dirty, err = 0, false, nil
		}
		return err
	})
	return version, dirty, err
}

// UpFS applies the golang-migrate files in fsys (for example a directory
// of templates written by Template, opened with os.DirFS) to the database at
// dsn. See Up for dsn and cancellation.
func UpFS(ctx context.Context, d Dialect, fsys fs.FS, dsn string) error {
	if fsys == nil {
		return errors.New("migrations: nil file system")
	}
	return runFS(ctx, d, fsys, dsn, func(m *migrate.Migrate) error { return m.Up() })
}

// DownFS rolls back the migrations in fsys. See UpFS.
func DownFS(ctx context.Context, d Dialect, fsys fs.FS, dsn string) error {
	if fsys == nil {
		return errors.New("migrations: nil file system")
	}
	return runFS(ctx, d, fsys, dsn, func(m *migrate.Migrate) error { return m.Down() })
}

func run(ctx context.Context, d Dialect, dsn string, op func(*migrate.Migrate) error) error {
	fsys, err := FS(d)
	if err != nil {
		return err
	}
	return runFS(ctx, d, fsys, dsn, op)
}

// runFS runs op over the migrations in fsys. Every error it returns has
// the DSN's password hidden: golang-migrate and the drivers may quote the
// URL they were given.
func runFS(ctx context.Context, d Dialect, fsys fs.FS, dsn string, op func(*migrate.Migrate) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dbURL, err := databaseURL(d, dsn)
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
			return nil, fmt.Errorf("%w: unsupported postgres options %q (only -c name=value)", ErrInvalidDSN, opts)
		}
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: malformed postgres option %q", ErrInvalidDSN, f)
		}
		out[strings.ReplaceAll(k, "-", "_")] = v
	}
	return out, nil
}

// databaseURL turns a user DSN into the URL golang-migrate's driver wants.
func databaseURL(d Dialect, dsn string) (string, error) {
	if strings.TrimSpace(dsn) == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidDSN)
	}
	switch d {
	case Postgres:
		u, err := url.Parse(dsn)
		if err != nil {
			// url.Parse's message quotes the URL and pieces of it
			// (a password with a raw '/' ends the host early: "invalid
			// port"), so it is not passed on.
			return "", fmt.Errorf("%w: cannot parse the postgres URL %s (percent-encode '@', ':', '/', '?', '#' and '%%' in the user name and password)",
				ErrInvalidDSN, redact.DSN(dsn))
		}
		switch u.Scheme {
		case "postgres", "postgresql", "pgx5":
		default:
			return "", fmt.Errorf("%w: a postgres URL starts with postgres://, got scheme %q", ErrInvalidDSN, u.Scheme)
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
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	case MySQL:
		dsn = strings.TrimPrefix(dsn, "mysql://")
		if !strings.Contains(dsn, "multiStatements=") {
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			dsn += sep + "multiStatements=true"
		}
		return "mysql://" + dsn, nil
	}
	return "", fmt.Errorf("%w %q", ErrUnknownDialect, d)
}
