package migrations_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/testkit"
)

// target is one database, reached through an isolated schema or database,
// and the queries to look at its catalogue.
type target struct {
	dialect   migrations.Dialect
	tables    []string // after every migration is up, sorted
	dsn       string
	tableList func(t *testing.T) []string
	exec      func(t *testing.T, sql string)
	columns   func(t *testing.T, table string) []string
}

func targets(t *testing.T) []target {
	t.Helper()
	pgURL := testkit.PostgresURL(t)
	pg := testkit.PostgresPoolFor(t, pgURL)
	myDSN := testkit.MySQLDSN(t)
	my := testkit.MySQLFor(t, myDSN)
	return []target{
		{
			dialect: migrations.Postgres, dsn: pgURL,
			// information_schema.tables lists no sequences on PostgreSQL.
			tables: []string{"concurkit_fences", "counters", "inventory", "jobs", "schema_migrations"},
			tableList: func(t *testing.T) []string {
				rows, err := pg.Query(t.Context(), `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`)
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
					out = append(out, s)
				}
				return out
			},
			exec: func(t *testing.T, sql string) {
				if _, err := pg.Exec(t.Context(), sql); err != nil {
					t.Fatal(err)
				}
			},
			columns: func(t *testing.T, table string) []string {
				rows, err := pg.Query(t.Context(), `SELECT column_name || ' ' || data_type || ' ' || coalesce(column_default, '') FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
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
				return out
			},
		},
		{
			dialect: migrations.MySQL, dsn: myDSN,
			// MariaDB lists a SEQUENCE as a table.
			tables: []string{"concurkit_fence_token_seq", "concurkit_fences", "counters", "inventory", "jobs", "schema_migrations"},
			tableList: func(t *testing.T) []string {
				rows, err := my.QueryContext(t.Context(), `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1`)
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
					out = append(out, s)
				}
				return out
			},
			exec: func(t *testing.T, sql string) {
				if _, err := my.ExecContext(t.Context(), sql); err != nil {
					t.Fatal(err)
				}
			},
			columns: func(t *testing.T, table string) []string {
				rows, err := my.QueryContext(t.Context(), `SELECT CONCAT(column_name, ' ', data_type, ' ', COALESCE(column_default, '')) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position`, table)
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
				return out
			},
		},
	}
}

func TestUpDownUp(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(string(tg.dialect), func(t *testing.T) {
			ctx := t.Context()
			want := tg.tables
			for i, step := range []struct {
				name   string
				apply  func(context.Context, migrations.Dialect, string) error
				tables []string
			}{
				{"up", migrations.Up, want},
				{"up again (no change)", migrations.Up, want},
				{"down", migrations.Down, []string{"schema_migrations"}},
				{"up after down", migrations.Up, want},
			} {
				if err := step.apply(ctx, tg.dialect, tg.dsn); err != nil {
					t.Fatalf("step %d %s: %v", i, step.name, err)
				}
				if got := strings.Join(slices.Sorted(slices.Values(tg.tableList(t))), ","); got != strings.Join(step.tables, ",") {
					t.Fatalf("step %d %s: tables %s, want %s", i, step.name, got, strings.Join(step.tables, ","))
				}
				v, dirty, err := migrations.Version(ctx, tg.dialect, tg.dsn)
				if err != nil || dirty {
					t.Fatalf("step %d %s: version err=%v dirty=%v", i, step.name, err, dirty)
				}
				wantV := latest(t, tg.dialect)
				if step.name == "down" {
					wantV = 0
				}
				if v != wantV {
					t.Fatalf("step %d %s: version %d, want %d", i, step.name, v, wantV)
				}
			}
			// The example rows the tests rely on fit the schema.
			tg.exec(t, `INSERT INTO inventory (id, sku, stock) VALUES (1, 'last-one', 1)`)
		})
	}
}

func TestTemplateAppliesToSampleTable(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(string(tg.dialect), func(t *testing.T) {
			ctx := t.Context()
			tg.exec(t, `CREATE TABLE orders (id BIGINT PRIMARY KEY, total BIGINT NOT NULL)`)
			tg.exec(t, `INSERT INTO orders (id, total) VALUES (1, 100)`)
			files, err := migrations.Template(migrations.TemplateOptions{
				Dialect: tg.dialect, Table: "orders", Version: 20260101000000,
				VersionColumn: migrations.DefaultVersionColumn, FencingColumn: migrations.DefaultFencingColumn,
			})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for name, body := range map[string]string{files.UpName: files.Up, files.DownName: files.Down} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// The user's own migrations table, so the template does not mix
			// with the toolkit's embedded migrations.
			dsn := tg.dsn
			if err := migrations.UpFS(ctx, tg.dialect, os.DirFS(dir), dsn); err != nil {
				t.Fatalf("apply template: %v", err)
			}
			cols := strings.Join(tg.columns(t, "orders"), "|")
			if !strings.Contains(cols, "version bigint 1") || !strings.Contains(cols, "max_seen_token bigint 0") {
				t.Fatalf("columns after up: %s", cols)
			}
			// Existing rows got the defaults: version 1, no token seen.
			tg.exec(t, `UPDATE orders SET total = 90, version = version + 1 WHERE id = 1 AND version = 1 AND max_seen_token <= 5`)
			if err := migrations.DownFS(ctx, tg.dialect, os.DirFS(dir), dsn); err != nil {
				t.Fatalf("revert template: %v", err)
			}
			if cols := strings.Join(tg.columns(t, "orders"), "|"); strings.Contains(cols, "version") || strings.Contains(cols, "max_seen_token") {
				t.Fatalf("columns after down: %s", cols)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	ctx := t.Context()
	if err := migrations.Up(ctx, "oracle", "x"); !errors.Is(err, migrations.ErrUnknownDialect) {
		t.Errorf("unknown dialect: %v", err)
	}
	if err := migrations.Up(ctx, migrations.Postgres, ""); !errors.Is(err, migrations.ErrInvalidDSN) {
		t.Errorf("empty DSN: %v", err)
	}
	if err := migrations.Up(ctx, migrations.Postgres, "mysql://x"); !errors.Is(err, migrations.ErrInvalidDSN) {
		t.Errorf("wrong scheme: %v", err)
	}
	if err := migrations.Up(ctx, migrations.Postgres, "postgres://u:p/w@h/db"); !errors.Is(err, migrations.ErrInvalidDSN) {
		t.Errorf("unparsable URL: %v", err)
	}
	if err := migrations.UpFS(ctx, migrations.Postgres, nil, "postgres://x"); err == nil {
		t.Error("nil FS accepted")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := migrations.Up(cancelled, migrations.Postgres, "postgres://127.0.0.1:1/x"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
	for _, o := range []migrations.TemplateOptions{
		{},
		{Dialect: migrations.Postgres, Table: "t", Version: 1},
		{Dialect: migrations.Postgres, Table: "", Version: 1, VersionColumn: "v"},
		{Dialect: migrations.Postgres, Table: "t", Version: 0, VersionColumn: "v"},
		{Dialect: migrations.Postgres, Table: "t", Version: 1, VersionColumn: "v", FencingColumn: "v"},
		{Dialect: migrations.Postgres, Table: "a..b", Version: 1, VersionColumn: "v"},
		{Dialect: migrations.MySQL, Table: "t", Version: 1, VersionColumn: strings.Repeat("x", 65)},
		{Dialect: migrations.MySQL, Table: "t\x00", Version: 1, VersionColumn: "v"},
		{Dialect: "sqlite", Table: "t", Version: 1, VersionColumn: "v"},
	} {
		if _, err := migrations.Template(o); !errors.Is(err, migrations.ErrInvalidTemplate) {
			t.Errorf("Template(%+v) = %v, want ErrInvalidTemplate", o, err)
		}
	}
}

func TestFilesArePaired(t *testing.T) {
	for _, d := range []migrations.Dialect{migrations.Postgres, migrations.MySQL} {
		names := mustFiles(t, d)
		seen := map[string]int{}
		for _, n := range names {
			base := strings.TrimSuffix(strings.TrimSuffix(n, ".up.sql"), ".down.sql")
			seen[base]++
		}
		for base, n := range seen {
			if n != 2 {
				t.Errorf("%s: %s has %d files, want an up and a down", d, base, n)
			}
		}
	}
}

// FuzzTemplate checks that no table or column name makes Template panic or
// put text outside the quoted identifiers: once every quoted identifier is
// cut out of the generated SQL, what remains is exactly the fixed skeleton.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"orders", "app.orders", "we\"ird", "back`tick", "new\nline", "semi;colon", "--comment", ""} {
		f.Add(s, "version")
	}
	f.Fuzz(func(t *testing.T, table, column string) {
		for _, d := range []migrations.Dialect{migrations.Postgres, migrations.MySQL} {
			files, err := migrations.Template(migrations.TemplateOptions{Dialect: d, Table: table, VersionColumn: column, Version: 1})
			if err != nil {
				if !errors.Is(err, migrations.ErrInvalidTemplate) {
					t.Fatalf("error %v does not wrap ErrInvalidTemplate", err)
				}
				continue
			}
			q := byte('"')
			if d == migrations.MySQL {
				q = '`'
			}
			for _, c := range []struct{ body, skeleton string }{
				{files.Up, "ALTER TABLE  ADD COLUMN  BIGINT NOT NULL DEFAULT 1;\n"},
				{files.Down, "ALTER TABLE  DROP COLUMN ;\n"},
			} {
				comment, rest, ok := strings.Cut(c.body, "\n")
				if !ok || !strings.HasPrefix(comment, "-- ") {
					t.Fatalf("%s: no leading comment line in %q", d, c.body)
				}
				got, err := stripQuoted(rest, q)
				if err != nil {
					t.Fatalf("%s: %v in %q", d, err, rest)
				}
				// Schema-qualified names leave a dot between two quoted parts.
				got = strings.ReplaceAll(got, ".", "")
				if got != c.skeleton {
					t.Fatalf("%s: text outside identifiers %q, want %q (sql %q)", d, got, c.skeleton, rest)
				}
			}
		}
	})
}

// stripQuoted removes every identifier quoted with q (q doubled inside).
func stripQuoted(s string, q byte) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != q {
			b.WriteByte(s[i])
			continue
		}
		for i++; ; i++ {
			if i >= len(s) {
				return "", errors.New("unterminated quoted identifier")
			}
			if s[i] == q {
				if i+1 < len(s) && s[i+1] == q {
					i++
					continue
				}
				break
			}
		}
	}
	return b.String(), nil
}

func mustFiles(t *testing.T, d migrations.Dialect) []string {
	t.Helper()
	fsys, err := migrations.FS(d)
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("%s: no migration files (%v)", d, err)
	}
	return names
}

// latest is the highest migration version shipped for d.
func latest(t *testing.T, d migrations.Dialect) uint {
	t.Helper()
	var top uint
	for _, n := range mustFiles(t, d) {
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, _, verr := migrations.Version(ctx, tc.dialect, tc.dsn)
			for _, err := range []error{migrations.Up(ctx, tc.dialect, tc.dsn), migrations.Down(ctx, tc.dialect, tc.dsn), verr} {
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
