package migrations_test

import (
	"context"
	"errors"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"io/fs"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/testkit"
)

// target is one database, reached through an isolated schema or database,
// and the queries to look at its catalogue.
type target struct {
	dialect migrations.Dialect
	dsn     string
	// query runs a query returning one text column.
	query func(t *testing.T, sql string, args ...any) []string
	exec  func(t *testing.T, sql string)
	// ph is the dialect's placeholder for the first bind parameter.
	ph string
	// open starts a session of its own (for holding locks) and returns
	// its exec and a function that ends it.
	open func(t *testing.T) (exec func(sql string) error, end func())
}

// newTarget returns a fresh isolated schema (PostgreSQL) or database
// (MariaDB) of dialect d.
func newTarget(t *testing.T, d migrations.Dialect) target {
	t.Helper()
	if d == migrations.Postgres {
		dsn := testkit.PostgresURL(t)
		pg := testkit.PostgresPoolFor(t, dsn)
		return target{
			dialect: d, dsn: dsn, ph: "$1",
			query: func(t *testing.T, sql string, args ...any) []string {
				t.Helper()
				rows, err := pg.Query(t.Context(), sql, args...)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var out []string
				for rows.Next() {
					var s string
					if err := rows.Scan(&s); err != nil {
						t.Fatal(err)
					}
					out = append(out, strings.TrimSpace(s))
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				return out
			},
			exec: func(t *testing.T, sql string) {
				t.Helper()
				if _, err := pg.Exec(t.Context(), sql); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			},
			open: func(t *testing.T) (func(string) error, func()) {
				c, err := pg.Acquire(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return func(sql string) error { _, err := c.Exec(t.Context(), sql); return err },
					func() { _, _ = c.Exec(context.WithoutCancel(t.Context()), "ROLLBACK"); c.Release() }
			},
		}
	}
	dsn := testkit.MySQLDSN(t)
	my := testkit.MySQLFor(t, dsn)
	return target{
		dialect: d, dsn: dsn, ph: "?",
		query: func(t *testing.T, sql string, args ...any) []string {
			t.Helper()
			rows, err := my.QueryContext(t.Context(), sql, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				out = append(out, strings.TrimSpace(s))
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		},
		exec: func(t *testing.T, sql string) {
			t.Helper()
			if _, err := my.ExecContext(t.Context(), sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		},
		open: func(t *testing.T) (func(string) error, func()) {
			c, err := my.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return func(sql string) error { _, err := c.ExecContext(t.Context(), sql); return err },
				func() { _, _ = c.ExecContext(context.WithoutCancel(t.Context()), "ROLLBACK"); _ = c.Close() }
		},
	}
}

var dialects = []migrations.Dialect{migrations.Postgres, migrations.MySQL}

// catalogue lists the schema's tables and sequences as "table NAME" and
// "sequence NAME", sorted.
func (tg target) catalogue(t *testing.T) []string {
	t.Helper()
	var out []string
	if tg.dialect == migrations.Postgres {
		out = tg.query(t, `SELECT 'table ' || table_name FROM information_schema.tables WHERE table_schema = current_schema()
			UNION ALL SELECT 'sequence ' || sequence_name FROM information_schema.sequences WHERE sequence_schema = current_schema()`)
	} else {
		out = tg.query(t, `SELECT CONCAT(IF(table_type = 'SEQUENCE', 'sequence ', 'table '), table_name) FROM information_schema.tables WHERE table_schema = DATABASE()`)
	}
	slices.Sort(out)
	return out
}

// columns lists a table's columns as "name type default".
func (tg target) columns(t *testing.T, table string) string {
	t.Helper()
	q := `SELECT column_name || ' ' || data_type || ' ' || coalesce(column_default, '') FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`
	if tg.dialect == migrations.MySQL {
		q = `SELECT CONCAT(column_name, ' ', data_type, ' ', COALESCE(column_default, '')) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position`
	}
	return strings.Join(tg.query(t, q, table), "|")
}

// history returns "version dirty" from a golang-migrate history table, or
// "" when it holds no row.
func (tg target) history(t *testing.T, table string) string {
	t.Helper()
	q := `SELECT version || ' ' || dirty FROM ` + table
	if tg.dialect == migrations.MySQL {
		q = `SELECT CONCAT(version, ' ', dirty) FROM ` + table
	}
	return strings.Join(tg.query(t, q), ",")
}

// objects is the catalogue entries Objects promises for d.
func objects(t *testing.T, d migrations.Dialect) []string {
	t.Helper()
	objs, err := migrations.Objects(d)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Kind+" "+o.Name)
	}
	return out
}

func sorted(s ...[]string) string {
	all := slices.Concat(s...)
	slices.Sort(all)
	return strings.Join(all, ",")
}

// TestUpDownUp: the toolkit set creates exactly Objects (plus its history
// table), Down removes them, and the sequence goes up, down, up cleanly.
func TestUpDownUp(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			ctx := t.Context()
			history := []string{"table " + migrations.HistoryTable}
			up := sorted(history, objects(t, d))
			for i, step := range []struct {
				name  string
				apply func(context.Context, migrations.Dialect, string) error
				want  string
				ver   uint
			}{
				{"up", migrations.Up, up, latest(t, d, migrations.FS)},
				{"up again (no change)", migrations.Up, up, latest(t, d, migrations.FS)},
				{"down", migrations.Down, sorted(history), 0},
				{"up after down", migrations.Up, up, latest(t, d, migrations.FS)},
			} {
				if err := step.apply(ctx, d, tg.dsn); err != nil {
					t.Fatalf("step %d %s: %v", i, step.name, err)
				}
				if got := sorted(tg.catalogue(t)); got != step.want {
					t.Fatalf("step %d %s: catalogue %s, want %s", i, step.name, got, step.want)
				}
				v, dirty, err := migrations.Version(ctx, d, tg.dsn)
				if err != nil || dirty || v != step.ver {
					t.Fatalf("step %d %s: Version = %d, %v, %v; want %d, false, nil", i, step.name, v, dirty, err, step.ver)
				}
			}
			// The toolkit objects are usable as the adapters use them.
			tg.exec(t, `INSERT INTO concurkit_fences (resource, max_seen_token) VALUES ('mailer', 3)`)
			if d == migrations.Postgres {
				tg.exec(t, `SELECT nextval('concurkit_fence_token_seq'), nextval('concurkit_lock_token_seq')`)
			} else {
				tg.exec(t, `SELECT NEXTVAL(concurkit_fence_token_seq)`)
			}
		})
	}
}

// TestExamplesSet: the examples set has its own history table, creates
// the demo tables, and is independent of the toolkit set.
func TestExamplesSet(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			ctx := t.Context()
			if err := migrations.UpExamples(ctx, d, tg.dsn); err != nil {
				t.Fatal(err)
			}
			want := "table concurkit_examples_schema_migrations,table counters,table inventory,table jobs"
			if d == migrations.Postgres {
				want = "sequence jobs_id_seq," + want // bigserial
			}
			if got := sorted(tg.catalogue(t)); got != want {
				t.Fatalf("after UpExamples: %s, want %s", got, want)
			}
			if v := tg.history(t, migrations.ExamplesHistoryTable); v != strconv.Itoa(int(latest(t, d, migrations.ExamplesFS)))+" "+boolText(d, false) {
				t.Fatalf("examples history %q", v)
			}
			tg.exec(t, `INSERT INTO inventory (id, sku, stock) VALUES (1, 'last-one', 1)`)
			tg.exec(t, `UPDATE inventory SET stock = 0, version = version + 1, max_seen_token = 7 WHERE id = 1 AND version = 1 AND max_seen_token <= 7`)
			tg.exec(t, `INSERT INTO counters (id) VALUES (1)`)
			tg.exec(t, `INSERT INTO jobs (payload) VALUES ('x')`)
			// The toolkit set neither sees nor touches the examples.
			if err := migrations.Up(ctx, d, tg.dsn); err != nil {
				t.Fatal(err)
			}
			if err := migrations.Down(ctx, d, tg.dsn); err != nil {
				t.Fatal(err)
			}
			want = "table concurkit_examples_schema_migrations,table concurkit_schema_migrations,table counters,table inventory,table jobs"
			if d == migrations.Postgres {
				want = "sequence jobs_id_seq," + want
			}
			if got := sorted(tg.catalogue(t)); got != want {
				t.Fatalf("after toolkit up and down: %s, want %s", got, want)
			}
			if err := migrations.DownExamples(ctx, d, tg.dsn); err != nil {
				t.Fatal(err)
			}
			want = "table concurkit_examples_schema_migrations,table concurkit_schema_migrations"
			if got := sorted(tg.catalogue(t)); got != want {
				t.Fatalf("after DownExamples: %s, want %s", got, want)
			}
		})
	}
}

func boolText(d migrations.Dialect, b bool) string {
	if d == migrations.MySQL {
		if b {
			return "1"
		}
		return "0"
	}
	return strconv.FormatBool(b)
}

// serviceMigrations is a service's own golang-migrate directory: a users
// table, then a column added to it.
func serviceMigrations(d migrations.Dialect, upTo int) fs.FS {
	text := map[string]string{
		"1_users.up.sql":         `CREATE TABLE users (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL)`,
		"1_users.down.sql":       `DROP TABLE users`,
		"2_users_email.up.sql":   `ALTER TABLE users ADD COLUMN email VARCHAR(128)`,
		"2_users_email.down.sql": `ALTER TABLE users DROP COLUMN email`,
	}
	m := fstest.MapFS{}
	for name, body := range text {
		if v, _ := strconv.Atoi(name[:1]); v <= upTo {
			m[name] = &fstest.MapFile{Data: []byte(body)}
		}
	}
	return m
}

// TestAdoptionEitherOrder is the adoption test: a schema whose
// schema_migrations already holds the service's own migrations applies
// concurkit's and its own in either order (and interleaved); both
// histories stay intact; concurkit's Down leaves the service's tables and
// history alone, and the service's Down leaves concurkit's.
func TestAdoptionEitherOrder(t *testing.T) {
	for _, d := range dialects {
		for _, order := range []string{"service first", "concurkit first", "interleaved"} {
			t.Run(string(d)+"/"+order, func(t *testing.T) {
				tg := newTarget(t, d)
				ctx := t.Context()
				service := func(upTo int) {
					t.Helper()
					if err := migrations.UpFS(ctx, d, serviceMigrations(d, upTo), tg.dsn); err != nil {
						t.Fatalf("service migrations to %d: %v", upTo, err)
					}
				}
				toolkit := func() {
					t.Helper()
					if err := migrations.Up(ctx, d, tg.dsn); err != nil {
						t.Fatalf("concurkit Up: %v", err)
					}
				}
				switch order {
				case "service first":
					service(2)
					toolkit()
				case "concurkit first":
					toolkit()
					service(2)
				case "interleaved":
					service(1)
					toolkit()
					service(2)
				}
				tg.exec(t, `INSERT INTO users (id, name, email) VALUES (1, 'ada', 'ada@example.com')`)
				svcTables := []string{"table schema_migrations", "table users"}
				ckHistory := []string{"table " + migrations.HistoryTable}
				if got, want := sorted(tg.catalogue(t)), sorted(svcTables, ckHistory, objects(t, d)); got != want {
					t.Fatalf("catalogue %s, want %s", got, want)
				}
				if got, want := tg.history(t, "schema_migrations"), "2 "+boolText(d, false); got != want {
					t.Fatalf("service history %q, want %q", got, want)
				}
				if v, dirty, err := migrations.Version(ctx, d, tg.dsn); err != nil || dirty || v != latest(t, d, migrations.FS) {
					t.Fatalf("concurkit Version = %d, %v, %v", v, dirty, err)
				}

				// concurkit's Down: the service keeps its table, row and history.
				if err := migrations.Down(ctx, d, tg.dsn); err != nil {
					t.Fatal(err)
				}
				if got, want := sorted(tg.catalogue(t)), sorted(svcTables, ckHistory); got != want {
					t.Fatalf("after concurkit Down: catalogue %s, want %s", got, want)
				}
				if got, want := tg.history(t, "schema_migrations"), "2 "+boolText(d, false); got != want {
					t.Fatalf("after concurkit Down: service history %q, want %q", got, want)
				}
				if got := tg.query(t, `SELECT email FROM users WHERE id = 1`); len(got) != 1 || got[0] != "ada@example.com" {
					t.Fatalf("after concurkit Down: users row %q", got)
				}

				// And the other way round.
				toolkit()
				if err := migrations.DownFS(ctx, d, serviceMigrations(d, 2), tg.dsn); err != nil {
					t.Fatal(err)
				}
				if got, want := sorted(tg.catalogue(t)), sorted([]string{"table schema_migrations"}, ckHistory, objects(t, d)); got != want {
					t.Fatalf("after the service's Down: catalogue %s, want %s", got, want)
				}
				if v, dirty, err := migrations.Version(ctx, d, tg.dsn); err != nil || dirty || v != latest(t, d, migrations.FS) {
					t.Fatalf("after the service's Down: concurkit Version = %d, %v, %v", v, dirty, err)
				}
			})
		}
	}
}

// TestUpReplacesHistoryParam: a DSN that names the service's own history
// table (x-migrations-table, as a service's golang-migrate URL may) still
// gets concurkit's, and UpFS refuses concurkit's history table for the
// caller's files.
func TestUpReplacesHistoryParam(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			ctx := t.Context()
			withParam := func(table string) string {
				sep := "?"
				if strings.Contains(tg.dsn, "?") {
					sep = "&"
				}
				return tg.dsn + sep + "x-migrations-table=" + table
			}
			if err := migrations.Up(ctx, d, withParam("app_migrations")); err != nil {
				t.Fatal(err)
			}
			if got := sorted(tg.catalogue(t)); got != sorted([]string{"table " + migrations.HistoryTable}, objects(t, d)) {
				t.Fatalf("catalogue %s", got)
			}
			for _, table := range []string{migrations.HistoryTable, migrations.ExamplesHistoryTable} {
				err := migrations.UpFS(ctx, d, serviceMigrations(d, 2), withParam(table))
				if !errors.Is(err, concurkit.ErrInvalidArgument) {
					t.Errorf("UpFS with x-migrations-table=%s: %v, want ErrInvalidArgument", table, err)
				}
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	ctx := t.Context()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for name, err := range map[string]error{
		"unknown dialect":  migrations.Up(ctx, "oracle", "x"),
		"empty DSN":        migrations.Up(ctx, migrations.Postgres, ""),
		"wrong scheme":     migrations.Up(ctx, migrations.Postgres, "mysql://x"),
		"unparsable URL":   migrations.Up(ctx, migrations.Postgres, "postgres://u:p/w@h/db"),
		"bad pg options":   migrations.Up(ctx, migrations.Postgres, "postgres://h/db?options=-x"),
		"mysql no slash":   migrations.Up(ctx, migrations.MySQL, "root@tcp(127.0.0.1:1)"),
		"nil FS":           migrations.UpFS(ctx, migrations.Postgres, nil, "postgres://x"),
		"nil FS down":      migrations.DownFS(ctx, migrations.MySQL, nil, "root@tcp(h)/x"),
		"examples dialect": migrations.UpExamples(ctx, "sqlite", "x"),
	} {
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, _, err := migrations.Version(ctx, "", "x"); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Version, empty dialect: %v", err)
	}
	for _, f := range []func(migrations.Dialect) (fs.FS, error){migrations.FS, migrations.ExamplesFS} {
		if _, err := f("oracle"); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("FS(oracle): %v", err)
		}
	}
	if _, err := migrations.Objects("oracle"); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("Objects(oracle): %v", err)
	}
	if _, err := migrations.ParseDialect("mariadb"); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("ParseDialect(mariadb): %v", err)
	}
	if err := migrations.Up(cancelled, migrations.Postgres, "postgres://127.0.0.1:1/x"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}

func TestFilesArePaired(t *testing.T) {
	for _, d := range dialects {
		for _, set := range []func(migrations.Dialect) (fs.FS, error){migrations.FS, migrations.ExamplesFS} {
			seen := map[string]int{}
			for _, n := range mustFiles(t, d, set) {
				seen[strings.TrimSuffix(strings.TrimSuffix(n, ".up.sql"), ".down.sql")]++
			}
			for base, n := range seen {
				if n != 2 {
					t.Errorf("%s: %s has %d files, want an up and a down", d, base, n)
				}
			}
		}
	}
}

func mustFiles(t *testing.T, d migrations.Dialect, set func(migrations.Dialect) (fs.FS, error)) []string {
	t.Helper()
	fsys, err := set(d)
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("%s: no migration files (%v)", d, err)
	}
	return names
}

// latest is the highest migration version of a set for d.
func latest(t *testing.T, d migrations.Dialect, set func(migrations.Dialect) (fs.FS, error)) uint {
	t.Helper()
	var top uint
	for _, n := range mustFiles(t, d, set) {
		v, err := strconv.ParseUint(n[:strings.IndexByte(n, '_')], 10, 64)
		if err != nil {
			t.Fatalf("%s: bad file name %q", d, n)
		}
		top = max(top, uint(v))
	}
	return top
}

// TestErrorsHidePassword: no error of Up, Down or Version may print the
// password of the DSN it was given, whether the DSN cannot be parsed (a
// raw '@', ':' or '/' in the password), names a server that refuses the
// connection, or is otherwise unusable.
func TestErrorsHidePassword(t *testing.T) {
	closed := closedPort(t)
	const pw = "p@ss:w/rd%Z"
	for _, tc := range []struct {
		name    string
		dialect migrations.Dialect
		dsn     string
	}{
		{"postgres raw password", migrations.Postgres, "postgres://alice:" + pw + "@" + closed + "/app?sslmode=disable"},
		{"postgres encoded password", migrations.Postgres, "postgres://alice:p%40ss%3Aw%2Frd%25Z@" + closed + "/app?sslmode=disable"},
		{"postgres password parameter", migrations.Postgres, "postgres://" + closed + "/app?sslmode=disable&password=" + strings.ReplaceAll(pw, "%", "%25")},
		{"postgres bad port", migrations.Postgres, "postgres://alice:s3cretpw@127.0.0.1:notaport/app"},
		{"postgres bad scheme", migrations.Postgres, "postgrex://alice:s3cretpw@" + closed + "/app"},
		{"mysql", migrations.MySQL, "alice:" + pw + "@tcp(" + closed + ")/app"},
		{"mysql url", migrations.MySQL, "mysql://alice:s3cretpw@tcp(" + closed + ")/app"},
		{"mysql bad dsn", migrations.MySQL, "alice:s3cretpw@tcp(" + closed + "/app"},
		{"mysql no slash", migrations.MySQL, "alice:s3cretpw@tcp(" + closed + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, _, verr := migrations.Version(ctx, tc.dialect, tc.dsn)
			for _, err := range []error{migrations.Up(ctx, tc.dialect, tc.dsn), migrations.Down(ctx, tc.dialect, tc.dsn), verr,
				migrations.UpExamples(ctx, tc.dialect, tc.dsn), migrations.UpFS(ctx, tc.dialect, serviceMigrations(tc.dialect, 2), tc.dsn)} {
				if err == nil {
					t.Fatal("no error")
				}
				msg := err.Error()
				for _, secret := range []string{"ss:w", "s3cretpw", "p%40ss", "%3Aw", `"%Z"`} {
					if strings.Contains(msg, secret) {
						t.Fatalf("error shows the password (%q): %s", secret, msg)
					}
				}
			}
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	_ = l.Close()
	return a
}
