package migrations

import (
	"fmt"
	"io/fs"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/ident"
)

// Default names used by Template and by the toolkit set (Up). They are the
// names the fenced and distlock adapters use when given none.
const (
	DefaultVersionColumn = "version"                   // optimistic version column
	DefaultFencingColumn = "max_seen_token"            // fencing column of a guarded table
	DefaultFenceTable    = "concurkit_fences"          // fence rows of fencedpg.Admit / fencedmysql.Admit
	DefaultFenceSequence = "concurkit_fence_token_seq" // token source for redislock and redlock
	DefaultLockSequence  = "concurkit_lock_token_seq"  // token sequence of distlock/pglock
)

// Lock-timeout guard of Template.
const (
	// DefaultLockTimeout bounds how long a generated migration waits for a
	// table lock when TemplateOptions.LockTimeout is zero.
	DefaultLockTimeout = 5 * time.Second
	// MaxLockTimeout is the largest TemplateOptions.LockTimeout accepted.
	MaxLockTimeout = 24 * time.Hour
	// DefaultDigits is the zero-padded width NextSequential proposes for a
	// directory without migrations (golang-migrate's `create -seq` default).
	DefaultDigits = 6
	maxDigits     = 20 // digits of math.MaxUint64
)

// TemplateOptions say what a generated migration adds. At least one of
// VersionColumn, FencingColumn, FenceTable, ShardTable and Sequences must
// be set.
type TemplateOptions struct {
	// Dialect is Postgres or MySQL. Required.
	Dialect Dialect
	// Table is the existing table to alter, optionally schema-qualified
	// ("app.orders"). Required with VersionColumn or FencingColumn, and
	// only then.
	Table string
	// VersionColumn, if non-empty, adds a BIGINT NOT NULL DEFAULT 1
	// column for optimistic locking (package optimistic); existing rows
	// get version 1. DefaultVersionColumn is the usual name.
	VersionColumn string
	// FencingColumn, if non-empty, adds a BIGINT NOT NULL DEFAULT 0 column
	// holding the highest fencing token seen (package fenced); existing
	// rows accept the first valid token. DefaultFencingColumn is the
	// usual name.
	FencingColumn string
	// FenceTable, if non-empty, creates a fence table of that name
	// (optionally schema-qualified) with the columns resource and
	// max_seen_token, for fencedpg.Admit / fencedmysql.Admit, which use
	// DefaultFenceTable unless told otherwise.
	FenceTable string
	// ShardTable, if non-empty, creates a shard table of that name
	// (optionally schema-qualified) for a hotrow.Sharded counter
	// (hotrowpg.NewShardStore, hotrowmysql.NewShardStore with
	// hotrow.Table's default columns): id (text; MySQL VARCHAR(255)),
	// shard (integer) and v (BIGINT NOT NULL), primary key (id, shard).
	// For numeric keys, change id's type before applying it.
	ShardTable string
	// Sequences, if any, creates one token sequence per name (optionally
	// schema-qualified), starting at 1: DefaultFenceSequence for
	// fencedpg.Sequence / fencedmysql.Sequence, DefaultLockSequence for
	// distlock/pglock. With MySQL they need MariaDB 10.3+: MySQL 8 has no
	// SEQUENCE objects, and the generated CREATE SEQUENCE fails there.
	Sequences []string
	// LockTimeout bounds how long each statement waits for a lock on the
	// table it changes: the migration sets it first (PostgreSQL
	// lock_timeout, rounded up to milliseconds; MySQL/MariaDB
	// lock_wait_timeout, rounded up to seconds) and resets it last. An
	// ALTER TABLE waits for every transaction using the table and every
	// later query on the table queues behind it, so on a busy table a
	// guarded migration fails fast instead of stalling the service. Zero
	// means DefaultLockTimeout; negative or above MaxLockTimeout is
	// invalid.
	LockTimeout time.Duration
	// Version is the migration's version number, the file name prefix:
	// TimestampVersion(time.Now()) or NextSequential of the migration
	// directory. Zero is invalid.
	Version uint64
	// Digits zero-pads Version to at least this many digits in the file
	// names (0006_…), as NextSequential proposes. Zero means no padding;
	// at most 20.
	Digits int
	// Title is the file name's title part. Empty means "concurkit_<table>",
	// or "concurkit_fencing" without Table (lower case, every run of other
	// characters than a-z and 0-9 as one "_").
	Title string
}

// TemplateFiles is a generated migration: two golang-migrate files.
type TemplateFiles struct {
	UpName, DownName string // e.g. 20260101120000_concurkit_orders.up.sql
	Up, Down         string // SQL text
}

var titleUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// dialectSQL is what differs between the dialects in a template.
type dialectSQL struct {
	quote        func(parts ...string) (string, error)
	setTimeout   func(time.Duration) string
	resetTimeout string
	fenceTable   string // CREATE TABLE %s (...)
	shardTable   string // CREATE TABLE %s (...)
	sequence     string // CREATE SEQUENCE %s ...
}

var templateSQL = map[Dialect]dialectSQL{
	Postgres: {
		quote: ident.Postgres,
		setTimeout: func(d time.Duration) string {
			ms := (d + time.Millisecond - 1) / time.Millisecond
			if ms%1000 == 0 {
				return fmt.Sprintf("SET lock_timeout = '%ds';", ms/1000)
			}
			return fmt.Sprintf("SET lock_timeout = '%dms';", ms)
		},
		resetTimeout: "RESET lock_timeout;",
		fenceTable:   "CREATE TABLE %s (resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0);",
		shardTable:   "CREATE TABLE %s (id text NOT NULL, shard integer NOT NULL, v bigint NOT NULL DEFAULT 0, PRIMARY KEY (id, shard));",
		sequence:     "CREATE SEQUENCE %s AS bigint MINVALUE 1;",
	},
	MySQL: {
		quote: ident.MySQL,
		setTimeout: func(d time.Duration) string {
			return fmt.Sprintf("SET SESSION lock_wait_timeout = %d;", (d+time.Second-1)/time.Second)
		},
		resetTimeout: "SET SESSION lock_wait_timeout = DEFAULT;",
		fenceTable:   "CREATE TABLE %s (resource VARCHAR(255) NOT NULL PRIMARY KEY, max_seen_token BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB;",
		shardTable:   "CREATE TABLE %s (id VARCHAR(255) NOT NULL, shard INT NOT NULL, v BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (id, shard)) ENGINE=InnoDB;",
		sequence:     "CREATE SEQUENCE %s START WITH 1 MINVALUE 1 INCREMENT BY 1;",
	},
}

// invalid returns an error matching concurkit.ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: migrations: "+format, append([]any{concurkit.ErrInvalidArgument}, args...)...)
}

// Template returns up and down migrations that add what o asks for: a
// version and/or fencing column on an existing table, a fence table, token
// sequences. Every statement runs under a lock-timeout guard (see
// TemplateOptions.LockTimeout); the down migration reverts the up one in
// reverse order. Identifiers are validated and quoted for the dialect;
// nothing from o reaches the SQL text except quoted identifiers and
// numbers. The up migration creates its objects without IF NOT EXISTS, so
// that the down migration drops only what the up one made.
//
// It does no I/O. Bad options are an error matching
// concurkit.ErrInvalidArgument that names the field.
func Template(o TemplateOptions) (TemplateFiles, error) {
	sqlOf, ok := templateSQL[o.Dialect]
	if !ok {
		return TemplateFiles{}, o.Dialect.check()
	}
	quote := func(field, name string) (string, error) {
		if strings.TrimSpace(name) == "" {
			return "", invalid("%s: empty name", field)
		}
		q, err := sqlOf.quote(strings.Split(name, ".")...)
		if err != nil {
			return "", fmt.Errorf("%w: migrations: %s: %w", concurkit.ErrInvalidArgument, field, err)
		}
		return q, nil
	}
	switch {
	case o.Version == 0:
		return TemplateFiles{}, invalid("Version must be positive")
	case o.Digits < 0 || o.Digits > maxDigits:
		return TemplateFiles{}, invalid("Digits %d outside [0, %d]", o.Digits, maxDigits)
	case o.LockTimeout < 0 || o.LockTimeout > MaxLockTimeout:
		return TemplateFiles{}, invalid("LockTimeout %s outside [0, %s]", o.LockTimeout, MaxLockTimeout)
	case o.VersionColumn == "" && o.FencingColumn == "" && o.FenceTable == "" && o.ShardTable == "" && len(o.Sequences) == 0:
		return TemplateFiles{}, invalid("nothing to generate (set VersionColumn, FencingColumn, FenceTable, ShardTable or Sequences)")
	case o.VersionColumn != "" && o.VersionColumn == o.FencingColumn:
		return TemplateFiles{}, invalid("VersionColumn and FencingColumn are both %q", o.VersionColumn)
	case (o.VersionColumn != "" || o.FencingColumn != "") && o.Table == "":
		return TemplateFiles{}, invalid("Table: empty name (the table to add the columns to)")
	case o.Table != "" && o.VersionColumn == "" && o.FencingColumn == "":
		return TemplateFiles{}, invalid("Table %q given but no column to add (set VersionColumn and/or FencingColumn)", o.Table)
	}
	timeout := o.LockTimeout
	if timeout == 0 {
		timeout = DefaultLockTimeout
	}

	// Statements in creation order, each with its reverse.
	type step struct{ up, down string }
	var steps []step
	// Relations share one namespace on PostgreSQL (tables and sequences),
	// so a name may be created once.
	created := map[string]string{}
	unique := func(field, name string) error {
		if prev, dup := created[name]; dup {
			return invalid("%s %q is also the %s", field, name, prev)
		}
		created[name] = field
		return nil
	}
	if o.FenceTable != "" {
		q, err := quote("FenceTable", o.FenceTable)
		if err != nil {
			return TemplateFiles{}, err
		}
		if err := unique("FenceTable", o.FenceTable); err != nil {
			return TemplateFiles{}, err
		}
		steps = append(steps, step{fmt.Sprintf(sqlOf.fenceTable, q), "DROP TABLE " + q + ";"})
	}
	if o.ShardTable != "" {
		q, err := quote("ShardTable", o.ShardTable)
		if err != nil {
			return TemplateFiles{}, err
		}
		if err := unique("ShardTable", o.ShardTable); err != nil {
			return TemplateFiles{}, err
		}
		steps = append(steps, step{fmt.Sprintf(sqlOf.shardTable, q), "DROP TABLE " + q + ";"})
	}
	for i, name := range o.Sequences {
		field := fmt.Sprintf("Sequences[%d]", i)
		q, err := quote(field, name)
		if err != nil {
			return TemplateFiles{}, err
		}
		if err := unique(field, name); err != nil {
			return TemplateFiles{}, err
		}
		steps = append(steps, step{fmt.Sprintf(sqlOf.sequence, q), "DROP SEQUENCE " + q + ";"})
	}
	if o.Table != "" {
		table, err := quote("Table", o.Table)
		if err != nil {
			return TemplateFiles{}, err
		}
		if err := unique("Table", o.Table); err != nil {
			return TemplateFiles{}, err
		}
		// One ALTER TABLE for both columns: one lock acquisition, and on
		// MySQL (no transactional DDL) both columns or neither.
		var add, drop []string
		for _, c := range []struct{ field, name, def string }{
			{"VersionColumn", o.VersionColumn, "NOT NULL DEFAULT 1"},
			{"FencingColumn", o.FencingColumn, "NOT NULL DEFAULT 0"},
		} {
			if c.name == "" {
				continue
			}
			q, err := quote(c.field, c.name)
			if err != nil {
				return TemplateFiles{}, err
			}
			add = append(add, "ADD COLUMN "+q+" BIGINT "+c.def)
			drop = append([]string{"DROP COLUMN " + q}, drop...)
		}
		steps = append(steps, step{
			"ALTER TABLE " + table + " " + strings.Join(add, ", ") + ";",
			"ALTER TABLE " + table + " " + strings.Join(drop, ", ") + ";",
		})
	}

	title := o.Title
	if title == "" {
		switch {
		case o.Table != "":
			title = "concurkit_" + o.Table
		case o.ShardTable != "" && o.FenceTable == "" && len(o.Sequences) == 0:
			title = "concurkit_" + o.ShardTable
		default:
			title = "concurkit_fencing"
		}
	}
	title = strings.Trim(titleUnsafe.ReplaceAllString(strings.ToLower(title), "_"), "_")
	if title == "" {
		return TemplateFiles{}, invalid("Title %q has no usable characters (a-z, 0-9)", o.Title)
	}

	guard := guardComment[o.Dialect]
	var up, down strings.Builder
	up.WriteString("-- Generated by concurkit migrate template.\n" + guard)
	up.WriteString(sqlOf.setTimeout(timeout) + "\n")
	for _, s := range steps {
		up.WriteString(s.up + "\n")
	}
	up.WriteString(sqlOf.resetTimeout + "\n")
	down.WriteString("-- Generated by concurkit migrate template: reverts the matching up migration.\n" + guard)
	down.WriteString(sqlOf.setTimeout(timeout) + "\n")
	for i := len(steps) - 1; i >= 0; i-- {
		down.WriteString(steps[i].down + "\n")
	}
	down.WriteString(sqlOf.resetTimeout + "\n")

	base := fmt.Sprintf("%0*d_%s", o.Digits, o.Version, title)
	return TemplateFiles{
		UpName: base + ".up.sql", DownName: base + ".down.sql",
		Up: up.String(), Down: down.String(),
	}, nil
}

// guardComment explains the first statement of a template to the people
// who review the migration.
var guardComment = map[Dialect]string{
	Postgres: "-- lock_timeout: an ALTER TABLE waits for every transaction using the table,\n" +
		"-- and every later query on it queues behind the ALTER. Fail fast instead\n" +
		"-- and rerun when the table is quieter (golang-migrate: the failed version is\n" +
		"-- marked dirty and its statements rolled back: migrate force the previous one).\n",
	MySQL: "-- lock_wait_timeout: an ALTER TABLE waits for the metadata lock of every\n" +
		"-- transaction using the table, and every later query on it queues behind\n" +
		"-- the ALTER. Fail fast instead and rerun when the table is quieter\n" +
		"-- (golang-migrate: the failed version is marked dirty: migrate force the\n" +
		"-- previous one; statements before the failed one are not rolled back).\n",
}

// TimestampVersion returns t in UTC as the number YYYYMMDDhhmmss, the
// timestamp numbering of golang-migrate's `create -format 20060102150405`.
// A time before year 1 or after 9999 gives a number of another width.
func TimestampVersion(t time.Time) uint64 {
	v, _ := strconv.ParseUint(t.UTC().Format("20060102150405"), 10, 64)
	return v
}

// migrationName matches golang-migrate's file names: {version}_{title}.{up|down}.{ext}.
var migrationName = regexp.MustCompile(`^([0-9]+)_(.*)\.(down|up)\.(.*)$`)

// NextSequential returns the sequential numbering's next version for the
// migration directory fsys (os.DirFS(dir)): one more than the highest
// version among its golang-migrate files ({version}_{title}.up.sql), or 1
// when there is none; and digits, the width to zero-pad it to
// (TemplateOptions.Digits): that of the highest version's file name, or
// DefaultDigits for an empty directory. Other files are ignored.
//
// A nil fsys, or a version that cannot grow (math.MaxUint64), is an error
// matching concurkit.ErrInvalidArgument; a directory that cannot be read
// returns the fs error (fs.ErrNotExist for a missing one).
func NextSequential(fsys fs.FS) (version uint64, digits int, err error) {
	if fsys == nil {
		return 0, 0, invalid("nil file system")
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return 0, 0, fmt.Errorf("migrations: read the migration directory: %w", err)
	}
	var top uint64
	digits = DefaultDigits
	found := false
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			continue
		}
		v, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			return 0, 0, invalid("migration %q: version out of range", e.Name())
		}
		if !found || v > top {
			top, digits, found = v, len(m[1]), true
		}
	}
	if !found {
		return 1, digits, nil
	}
	if top == math.MaxUint64 {
		return 0, 0, invalid("migration version %d cannot grow", top)
	}
	return top + 1, digits, nil
}
