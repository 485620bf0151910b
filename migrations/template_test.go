package migrations_test

import (
	"errors"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/migrations"
)

// writeTemplate writes files into a new directory and returns it.
func writeTemplate(t *testing.T, files migrations.TemplateFiles) fs.FS {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{files.UpName: files.Up, files.DownName: files.Down} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return os.DirFS(dir)
}

// sequencesFor is what a template may create on d's test server: MariaDB
// has sequences (MySQL 8 would not).
func sequencesFor(d migrations.Dialect) []string {
	if d == migrations.Postgres {
		return []string{migrations.DefaultFenceSequence, migrations.DefaultLockSequence}
	}
	return []string{migrations.DefaultFenceSequence}
}

// TestTemplateAppliesToSampleTable: a template with every part applies to
// an existing table with rows, gives the rows the documented defaults, and
// its down migration removes exactly what it added.
func TestTemplateAppliesToSampleTable(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			ctx := t.Context()
			tg.exec(t, `CREATE TABLE orders (id BIGINT PRIMARY KEY, total BIGINT NOT NULL)`)
			tg.exec(t, `INSERT INTO orders (id, total) VALUES (1, 100)`)
			before := sorted(tg.catalogue(t))
			files, err := migrations.Template(migrations.TemplateOptions{
				Dialect: d, Table: "orders", Version: 20260101000000,
				VersionColumn: migrations.DefaultVersionColumn, FencingColumn: migrations.DefaultFencingColumn,
				FenceTable: migrations.DefaultFenceTable, ShardTable: "view_shards", Sequences: sequencesFor(d),
			})
			if err != nil {
				t.Fatal(err)
			}
			dir := writeTemplate(t, files)
			// The service's own history table (golang-migrate's default):
			// the template is one of the service's migrations.
			if err := migrations.UpFS(ctx, d, dir, tg.dsn); err != nil {
				t.Fatalf("apply template: %v\n%s", err, files.Up)
			}
			cols := tg.columns(t, "orders")
			if !strings.Contains(cols, "version bigint 1") || !strings.Contains(cols, "max_seen_token bigint 0") {
				t.Fatalf("columns after up: %s", cols)
			}
			want := []string{"table schema_migrations", "table " + migrations.DefaultFenceTable, "table view_shards"}
			for _, s := range sequencesFor(d) {
				want = append(want, "sequence "+s)
			}
			if got := sorted(tg.catalogue(t)); got != sorted(strings.Split(before, ","), want) {
				t.Fatalf("catalogue after up: %s", got)
			}
			// Existing rows got the defaults: version 1, no token seen; the
			// fence table and sequences work as the adapters use them.
			tg.exec(t, `UPDATE orders SET total = 90, version = version + 1, max_seen_token = 5 WHERE id = 1 AND version = 1 AND max_seen_token <= 5`)
			if got := tg.query(t, `SELECT CONCAT(version, '/', max_seen_token) FROM orders`); len(got) != 1 || got[0] != "2/5" {
				t.Fatalf("guarded update: %q", got)
			}
			tg.exec(t, `INSERT INTO concurkit_fences (resource) VALUES ('mailer')`)
			// The shard table has hotrow.Table's default columns, one row
			// per (id, shard).
			tg.exec(t, `INSERT INTO view_shards (id, shard, v) VALUES ('home', 0, 5), ('home', 1, -2)`)
			if got := tg.query(t, `SELECT CONCAT(COUNT(*), '/', SUM(v)) FROM view_shards WHERE id = 'home'`); len(got) != 1 || got[0] != "2/3" {
				t.Fatalf("shard rows: %q", got)
			}
			exec, done := tg.open(t)
			err = exec(`INSERT INTO view_shards (id, shard) VALUES ('home', 1)`)
			done()
			if err == nil {
				t.Fatal("a second row for one (id, shard) was accepted")
			}
			if d == migrations.Postgres {
				tg.exec(t, `SELECT nextval('concurkit_fence_token_seq'), nextval('concurkit_lock_token_seq')`)
			} else {
				tg.exec(t, `SELECT NEXTVAL(concurkit_fence_token_seq)`)
			}
			if err := migrations.DownFS(ctx, d, dir, tg.dsn); err != nil {
				t.Fatalf("revert template: %v", err)
			}
			if cols := tg.columns(t, "orders"); strings.Contains(cols, "version") || strings.Contains(cols, "max_seen_token") {
				t.Fatalf("columns after down: %s", cols)
			}
			if got := sorted(tg.catalogue(t)); got != sorted(strings.Split(before, ","), []string{"table schema_migrations"}) {
				t.Fatalf("catalogue after down: %s", got)
			}
		})
	}
}

// TestTemplateLockTimeout: a template's ALTER TABLE on a table another
// transaction is using gives up after LockTimeout (instead of queueing
// every later query on the table behind it until that transaction ends),
// and changes nothing.
func TestTemplateLockTimeout(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			tg.exec(t, `CREATE TABLE orders (id BIGINT PRIMARY KEY, total BIGINT NOT NULL)`)
			files, err := migrations.Template(migrations.TemplateOptions{
				Dialect: d, Table: "orders", Version: 1,
				VersionColumn: migrations.DefaultVersionColumn, LockTimeout: 500 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			// A transaction that read the table holds a lock (PostgreSQL
			// ACCESS SHARE, MySQL a shared metadata lock) until it ends;
			// ALTER TABLE needs an exclusive one.
			exec, end := tg.open(t)
			var once sync.Once
			release := func() { once.Do(end) }
			defer release()
			// Without a guard the ALTER waits for the reader: end it after
			// a while so that such a run fails instead of hanging.
			timer := time.AfterFunc(30*time.Second, release)
			defer timer.Stop()
			if err := exec("BEGIN"); err != nil {
				t.Fatal(err)
			}
			if err := exec("SELECT * FROM orders"); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = migrations.UpFS(t.Context(), d, writeTemplate(t, files), tg.dsn)
			elapsed := time.Since(start)
			t.Logf("UpFS returned after %s: %v", elapsed.Round(time.Millisecond), err)
			if err == nil {
				t.Fatalf("ALTER TABLE waited for the reader (%s) instead of timing out", elapsed)
			}
			if msg := strings.ToLower(err.Error()); !strings.Contains(msg, "lock timeout") && !strings.Contains(msg, "lock wait timeout") {
				t.Fatalf("not a lock timeout: %v", err)
			}
			if elapsed > 20*time.Second {
				t.Fatalf("gave up after %s, want about the 500ms lock timeout", elapsed)
			}
			release()
			if cols := tg.columns(t, "orders"); strings.Contains(cols, "version") {
				t.Fatalf("a timed-out migration changed the table: %s", cols)
			}
		})
	}
}

func TestTemplateBadOptions(t *testing.T) {
	ok := migrations.TemplateOptions{Dialect: migrations.Postgres, Table: "t", Version: 1, VersionColumn: "v"}
	if _, err := migrations.Template(ok); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(o *migrations.TemplateOptions){
		"zero value":            func(o *migrations.TemplateOptions) { *o = migrations.TemplateOptions{} },
		"unknown dialect":       func(o *migrations.TemplateOptions) { o.Dialect = "sqlite" },
		"nothing to add":        func(o *migrations.TemplateOptions) { o.VersionColumn = "" },
		"columns without table": func(o *migrations.TemplateOptions) { o.Table = "" },
		"blank table":           func(o *migrations.TemplateOptions) { o.Table = "  " },
		"zero version":          func(o *migrations.TemplateOptions) { o.Version = 0 },
		"same column twice":     func(o *migrations.TemplateOptions) { o.FencingColumn = "v" },
		"empty schema part":     func(o *migrations.TemplateOptions) { o.Table = "a..b" },
		"long mysql column": func(o *migrations.TemplateOptions) {
			o.Dialect, o.VersionColumn = migrations.MySQL, strings.Repeat("x", 65)
		},
		"NUL in table":           func(o *migrations.TemplateOptions) { o.Table = "t\x00" },
		"negative lock timeout":  func(o *migrations.TemplateOptions) { o.LockTimeout = -time.Second },
		"huge lock timeout":      func(o *migrations.TemplateOptions) { o.LockTimeout = migrations.MaxLockTimeout + 1 },
		"negative digits":        func(o *migrations.TemplateOptions) { o.Digits = -1 },
		"too many digits":        func(o *migrations.TemplateOptions) { o.Digits = 21 },
		"empty sequence":         func(o *migrations.TemplateOptions) { o.Sequences = []string{""} },
		"duplicate sequence":     func(o *migrations.TemplateOptions) { o.Sequences = []string{"s", "s"} },
		"fence table is table":   func(o *migrations.TemplateOptions) { o.FenceTable = "t" },
		"sequence is fence":      func(o *migrations.TemplateOptions) { o.FenceTable, o.Sequences = "f", []string{"f"} },
		"bad fence table":        func(o *migrations.TemplateOptions) { o.FenceTable = "a.\x00" },
		"shard table is fence":   func(o *migrations.TemplateOptions) { o.FenceTable, o.ShardTable = "f", "f" },
		"bad shard table":        func(o *migrations.TemplateOptions) { o.ShardTable = "a..b" },
		"table without columns":  func(o *migrations.TemplateOptions) { o.VersionColumn, o.FenceTable = "", "f" },
		"title without a letter": func(o *migrations.TemplateOptions) { o.Title = "!!!" },
	} {
		o := ok
		edit(&o)
		if _, err := migrations.Template(o); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: Template(%+v) = %v, want ErrInvalidArgument", name, o, err)
		}
	}
}

func TestTemplateNamesAndGuards(t *testing.T) {
	for _, tc := range []struct {
		o                  migrations.TemplateOptions
		upName, set, reset string
	}{
		{migrations.TemplateOptions{Dialect: migrations.Postgres, FenceTable: "f", Version: 7, Digits: 4},
			"0007_concurkit_fencing.up.sql", "SET lock_timeout = '5s';", "RESET lock_timeout;"},
		{migrations.TemplateOptions{Dialect: migrations.Postgres, Sequences: []string{"s"}, Version: 7, LockTimeout: 1500*time.Millisecond + 1},
			"7_concurkit_fencing.up.sql", "SET lock_timeout = '1501ms';", "RESET lock_timeout;"},
		{migrations.TemplateOptions{Dialect: migrations.MySQL, Table: "App.Orders", FencingColumn: "fence", Version: 20260101000000, LockTimeout: 1500 * time.Millisecond},
			"20260101000000_concurkit_app_orders.up.sql", "SET SESSION lock_wait_timeout = 2;", "SET SESSION lock_wait_timeout = DEFAULT;"},
		{migrations.TemplateOptions{Dialect: migrations.MySQL, FenceTable: "f", Version: 12, Digits: 1, Title: "Add fences!"},
			"12_add_fences.up.sql", "SET SESSION lock_wait_timeout = 5;", "SET SESSION lock_wait_timeout = DEFAULT;"},
		{migrations.TemplateOptions{Dialect: migrations.Postgres, ShardTable: "app.view_shards", Version: 3},
			"3_concurkit_app_view_shards.up.sql", "SET lock_timeout = '5s';", "RESET lock_timeout;"},
	} {
		files, err := migrations.Template(tc.o)
		if err != nil {
			t.Fatal(err)
		}
		if files.UpName != tc.upName || files.DownName != strings.TrimSuffix(tc.upName, ".up.sql")+".down.sql" {
			t.Errorf("%+v: names %s, %s; want %s", tc.o, files.UpName, files.DownName, tc.upName)
		}
		for _, body := range []string{files.Up, files.Down} {
			lines := statements(body)
			if lines[0] != tc.set || lines[len(lines)-1] != tc.reset {
				t.Errorf("%+v: guard not first and reset not last:\n%s", tc.o, body)
			}
		}
	}
}

// statements returns the lines of body that are not comments.
func statements(body string) []string {
	var out []string
	for l := range strings.SplitSeq(strings.TrimSuffix(body, "\n"), "\n") {
		if !strings.HasPrefix(l, "-- ") {
			out = append(out, l)
		}
	}
	return out
}

func TestNextSequential(t *testing.T) {
	file := &fstest.MapFile{}
	for _, tc := range []struct {
		names   []string
		version uint64
		digits  int
	}{
		{nil, 1, migrations.DefaultDigits},
		{[]string{"README.md", "0001_x.txt"}, 1, migrations.DefaultDigits},
		{[]string{"0001_a.up.sql", "0001_a.down.sql", "0002_b.up.sql", "0002_b.down.sql", "notes.md"}, 3, 4},
		{[]string{"9_a.up.sql", "10_b.up.sql", "10_b.down.sql"}, 11, 2},
		{[]string{"000001_a.up.sql", "7_b.up.sql"}, 8, 1},
		{[]string{"20260101120000_a.up.sql", "20260101120000_a.down.sql"}, 20260101120001, 14},
	} {
		m := fstest.MapFS{}
		for _, n := range tc.names {
			m[n] = file
		}
		v, digits, err := migrations.NextSequential(m)
		if err != nil || v != tc.version || digits != tc.digits {
			t.Errorf("%v: NextSequential = %d, %d, %v; want %d, %d", tc.names, v, digits, err, tc.version, tc.digits)
		}
	}
	for name, fsys := range map[string]fs.FS{
		"nil":       nil,
		"overflow":  fstest.MapFS{strconv.FormatUint(math.MaxUint64, 10) + "_a.up.sql": file},
		"too large": fstest.MapFS{"99999999999999999999999_a.up.sql": file},
	} {
		if _, _, err := migrations.NextSequential(fsys); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, _, err := migrations.NextSequential(os.DirFS(filepath.Join(t.TempDir(), "missing"))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing directory: %v, want fs.ErrNotExist", err)
	}
}

func TestTimestampVersion(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("CET", 3600))
	if v := migrations.TimestampVersion(at); v != 20260102020405 {
		t.Fatalf("TimestampVersion = %d, want 20260102020405 (UTC)", v)
	}
}

// FuzzTemplate checks that no combination of names and options makes
// Template panic or put text outside the quoted identifiers: once every
// quoted identifier is cut out of the generated SQL, every line is one of
// the fixed comment lines or statement skeletons, the lock-timeout guard
// comes first and its reset last, and there is one statement per part asked
// for.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"orders", "app.orders", "we\"ird", "back`tick", "new\nline", "semi;colon", "--comment", "/*x*/", ""} {
		f.Add(s, "version", "fences", "seq", uint8(15), int64(5000))
	}
	f.Add("t", "v", "t", "t", uint8(15), int64(-1))
	f.Add("t", "v", "f", "s", uint8(8), int64(1))
	f.Add("t", "v", "app.views", "s", uint8(31), int64(1))
	f.Add("a.b.c", "v\x00", "s.f", "s.s", uint8(12), int64(1e12))
	comments := map[string]bool{}
	for _, d := range dialects {
		files, err := migrations.Template(migrations.TemplateOptions{Dialect: d, FenceTable: "f", Version: 1})
		if err != nil {
			f.Fatal(err)
		}
		for l := range strings.SplitSeq(files.Up+files.Down, "\n") {
			if strings.HasPrefix(l, "-- ") {
				comments[l] = true
			}
		}
	}
	skeletons := map[migrations.Dialect]*regexp.Regexp{
		migrations.Postgres: regexp.MustCompile(`^(` + strings.Join([]string{
			`SET lock_timeout = '[1-9][0-9]*m?s';`,
			`RESET lock_timeout;`,
			`CREATE TABLE  \(resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0\);`,
			`CREATE TABLE  \(id text NOT NULL, shard integer NOT NULL, v bigint NOT NULL DEFAULT 0, PRIMARY KEY \(id, shard\)\);`,
			`CREATE SEQUENCE  AS bigint MINVALUE 1;`,
			`ALTER TABLE  ADD COLUMN  BIGINT NOT NULL DEFAULT [01](, ADD COLUMN  BIGINT NOT NULL DEFAULT 0)?;`,
			`ALTER TABLE  DROP COLUMN (, DROP COLUMN )?;`,
			`DROP SEQUENCE ;`,
			`DROP TABLE ;`,
		}, "|") + `)$`),
		migrations.MySQL: regexp.MustCompile(`^(` + strings.Join([]string{
			`SET SESSION lock_wait_timeout = [1-9][0-9]*;`,
			`SET SESSION lock_wait_timeout = DEFAULT;`,
			`CREATE TABLE  \(resource VARCHAR\(255\) NOT NULL PRIMARY KEY, max_seen_token BIGINT NOT NULL DEFAULT 0\) ENGINE=InnoDB;`,
			`CREATE TABLE  \(id VARCHAR\(255\) NOT NULL, shard INT NOT NULL, v BIGINT NOT NULL DEFAULT 0, PRIMARY KEY \(id, shard\)\) ENGINE=InnoDB;`,
			`CREATE SEQUENCE  START WITH 1 MINVALUE 1 INCREMENT BY 1;`,
			`ALTER TABLE  ADD COLUMN  BIGINT NOT NULL DEFAULT [01](, ADD COLUMN  BIGINT NOT NULL DEFAULT 0)?;`,
			`ALTER TABLE  DROP COLUMN (, DROP COLUMN )?;`,
			`DROP SEQUENCE ;`,
			`DROP TABLE ;`,
		}, "|") + `)$`),
	}
	f.Fuzz(func(t *testing.T, table, column, fence, seq string, parts uint8, timeoutMS int64) {
		for _, d := range dialects {
			o := migrations.TemplateOptions{Dialect: d, Table: table, Version: 1, LockTimeout: time.Duration(timeoutMS) * time.Millisecond}
			if parts&1 != 0 {
				o.VersionColumn = column
			}
			if parts&2 != 0 {
				o.FencingColumn = column + "_f"
			}
			if parts&4 != 0 {
				o.FenceTable = fence
			}
			if parts&8 != 0 {
				o.Sequences = []string{seq, seq + "2"}
			}
			if parts&16 != 0 {
				o.ShardTable = fence + "_shards"
			}
			files, err := migrations.Template(o)
			if err != nil {
				if !errors.Is(err, concurkit.ErrInvalidArgument) {
					t.Fatalf("error %v does not match ErrInvalidArgument", err)
				}
				continue
			}
			want := 2 // guard and reset
			if o.VersionColumn != "" || o.FencingColumn != "" {
				want++
			}
			if o.FenceTable != "" {
				want++
			}
			if o.ShardTable != "" {
				want++
			}
			want += len(o.Sequences)
			q := byte('"')
			if d == migrations.MySQL {
				q = '`'
			}
			for _, body := range []string{files.Up, files.Down} {
				rest, err := stripQuoted(body, q)
				if err != nil {
					t.Fatalf("%s: %v in %q", d, err, body)
				}
				var stmts []string
				for l := range strings.SplitSeq(strings.TrimSuffix(rest, "\n"), "\n") {
					// Schema-qualified names leave a dot between quoted parts.
					stmt := strings.ReplaceAll(l, ".", "")
					switch {
					case comments[l]:
					case skeletons[d].MatchString(stmt):
						stmts = append(stmts, stmt)
					default:
						t.Fatalf("%s: line %q is neither a known comment nor a statement skeleton (sql %q)", d, l, body)
					}
				}
				reset := map[string]bool{"RESET lock_timeout;": true, "SET SESSION lock_wait_timeout = DEFAULT;": true}
				if len(stmts) != want || !strings.HasPrefix(stmts[0], "SET ") || reset[stmts[0]] || !reset[stmts[len(stmts)-1]] {
					t.Fatalf("%s: statements %q, want %d with the guard first and its reset last", d, stmts, want)
				}
			}
			if !strings.HasSuffix(files.UpName, ".up.sql") || strings.ContainsAny(files.UpName, "/\\\x00 ") {
				t.Fatalf("file name %q", files.UpName)
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
				return "", fmt.Errorf("unterminated quoted identifier")
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
