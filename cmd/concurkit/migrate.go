package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/internal/redact"
	"github.com/concurkit/concurkit/migrations"
)

func migrateCommand() *command {
	applyAbout := func(verb string) string {
		return verb + ` concurkit's own tables and sequences (the toolkit set
of package migrations: the fence table concurkit_fences and the token
sequences; it lists them first), recording the version in the golang-migrate
history table ` + migrations.HistoryTable + `. It never touches a table
of yours nor golang-migrate's default schema_migrations, so a service's own
migrations and concurkit's apply in either order.`
	}
	dsnExample := "--dialect postgres --dsn 'postgres://app@localhost:5432/app?sslmode=disable'"
	return &command{
		name:    "migrate",
		summary: "apply concurkit's own tables, or generate migrations for yours",
		args:    "<command> [flags]",
		about: `up, down and version manage concurkit's own tables (never yours) with their own
history table; template writes migrations for your tables, to commit with your
own migrations.`,
		example: `concurkit migrate up ` + dsnExample + `
concurkit migrate template --dialect mysql --table orders --version-column --fencing-column --out db/migrations`,
		subs: []*command{
			{
				name: "migrate up", summary: "create concurkit's tables and sequences (history: " + migrations.HistoryTable + ")",
				args: "--dialect postgres|mysql --dsn DSN", about: applyAbout("Creates, if missing,"),
				example: "concurkit migrate up " + dsnExample + "\nconcurkit migrate up --dialect mysql --dsn 'app:secret@tcp(db:3306)/app'",
				run:     runMigrateApply,
			},
			{
				name: "migrate down", summary: "drop concurkit's tables and sequences (fence rows and token positions are lost)",
				args: "--dialect postgres|mysql --dsn DSN", about: applyAbout("Drops") + `
Tokens minted afterwards start at 1 again.`,
				example: "concurkit migrate down " + dsnExample,
				run:     runMigrateApply,
			},
			{
				name: "migrate version", summary: "print the version of concurkit's migrations in the database",
				args: "--dialect postgres|mysql --dsn DSN",
				about: `Prints the version of concurkit's toolkit set recorded in the history table
` + migrations.HistoryTable + ` (0: none applied), whether the last migration
failed half-way (dirty), and the latest version this binary ships.`,
				example: "concurkit migrate version " + dsnExample,
				run:     runMigrateApply,
			},
			templateCommand(),
		},
	}
}

// dbFlags are the flags of migrate up, down and version.
func dbFlags(fs *flag.FlagSet) (dialect, dsn *string) {
	dialect = fs.String("dialect", "", "postgres, or mysql for MariaDB and MySQL (required)")
	dsn = fs.String("dsn", "", "database URL postgres://user:pass@host:port/db?search_path=schema, or MySQL DSN user:pass@tcp(host:port)/db (required)")
	return dialect, dsn
}

func runMigrateApply(ctx context.Context, c *command, args []string, stdout, stderr io.Writer) (err error) {
	fs := c.flagSet()
	dialectFlag, dsn := dbFlags(fs)
	if err := c.parse(fs, args, stdout); err != nil {
		return err
	}
	d, err := migrations.ParseDialect(*dialectFlag)
	switch {
	case *dialectFlag == "":
		return c.flagErr("dialect", "required (postgres or mysql)")
	case err != nil:
		return c.flagErr("dialect", "unknown dialect %q (postgres, or mysql for MariaDB and MySQL)", *dialectFlag)
	case strings.TrimSpace(*dsn) == "":
		return c.flagErr("dsn", "required")
	}
	// The migrations package hides the DSN's password in its errors;
	// redact again so that nothing this command prints can show it.
	defer func() {
		err = redact.Error(err, *dsn)
		if errors.Is(err, concurkit.ErrInvalidArgument) {
			// The dialect is valid, so the DSN is at fault.
			err = c.flagErr("dsn", "%v", err)
		}
	}()
	objects, err := migrations.Objects(d)
	if err != nil {
		return err
	}
	latest, err := latestVersion(d)
	if err != nil {
		return err
	}
	verb := c.name[strings.LastIndexByte(c.name, ' ')+1:]
	switch verb {
	case "up":
		fmt.Fprintf(stdout, "concurkit migrate up: creating, if missing (history table %s; no table of yours is touched):\n", migrations.HistoryTable)
		printObjects(stdout, objects)
		if err := migrations.Up(ctx, d, *dsn); err != nil {
			return err
		}
	case "down":
		fmt.Fprintf(stdout, "concurkit migrate down: dropping (history table %s; no table of yours is touched):\n", migrations.HistoryTable)
		printObjects(stdout, objects)
		if err := migrations.Down(ctx, d, *dsn); err != nil {
			return err
		}
	}
	v, dirty, err := migrations.Version(ctx, d, *dsn)
	if err != nil {
		return err
	}
	state := ""
	if dirty {
		state = " DIRTY (the last migration failed half-way: fix the database, then rerun)"
	}
	fmt.Fprintf(stdout, "version %d of %d in %s%s\n", v, latest, migrations.HistoryTable, state)
	return nil
}

func printObjects(w io.Writer, objects []migrations.Object) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, o := range objects {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", o.Kind, o.Name, o.Use)
	}
	tw.Flush()
}

// latestVersion is the highest version of the toolkit set of d.
func latestVersion(d migrations.Dialect) (uint64, error) {
	fsys, err := migrations.FS(d)
	if err != nil {
		return 0, err
	}
	v, _, err := migrations.NextSequential(fsys)
	return v - 1, err
}

// optionalName is a flag that may be given bare (--version-column, meaning
// the default name) or with a value (--version-column=rev). With list set,
// every use adds a name.
type optionalName struct {
	def    string
	list   bool
	values []string
}

func (o *optionalName) String() string   { return strings.Join(o.values, ",") }
func (o *optionalName) IsBoolFlag() bool { return true }
func (o *optionalName) Set(s string) error {
	switch s {
	case "true":
		s = o.def
	case "false":
		o.values = nil
		return nil
	case "":
		return errors.New("empty name")
	}
	if o.list {
		o.values = append(o.values, s)
	} else {
		o.values = []string{s}
	}
	return nil
}

func (o *optionalName) value() string {
	if len(o.values) == 0 {
		return ""
	}
	return o.values[0]
}

func templateCommand() *command {
	return &command{
		name:    "migrate template",
		summary: "write up/down migrations adding version/fencing columns, a fence table, a shard table or token sequences",
		args:    "--dialect postgres|mysql [--table T --version-column --fencing-column] [--fence-table] [--shard-table T] [--sequence] [--out DIR]",
		about: `Generates a golang-migrate pair (VERSION_TITLE.up.sql and .down.sql) for your own
schema, to commit with your own migrations: an optimistic version column
(BIGINT NOT NULL DEFAULT 1) and/or a fencing column (BIGINT NOT NULL DEFAULT 0)
added to an existing table in one ALTER TABLE, a fence table, a shard table for
a hotrow.Sharded counter, token sequences
(PostgreSQL; MariaDB 10.3+ — MySQL 8 has no SEQUENCE objects). Each file starts
with a lock-timeout guard (PostgreSQL SET lock_timeout, MySQL/MariaDB SET
SESSION lock_wait_timeout): on a busy table the ALTER fails fast instead of
making every query on the table wait behind it.

Without --out the files are printed, not written. Versions are the current UTC
time (YYYYMMDDhhmmss) or, with --numbering sequential, the next number after
the highest in --out, zero-padded like it. An existing file is never
overwritten.`,
		example: `concurkit migrate template --dialect postgres --table shop.orders --version-column --fencing-column
concurkit migrate template --dialect mysql --table orders --version-column=rev --numbering sequential --out db/migrations
concurkit migrate template --dialect postgres --fence-table --sequence --sequence=concurkit_lock_token_seq --out db/migrations
concurkit migrate template --dialect mysql --shard-table page_view_shards`,
		run: runMigrateTemplate,
	}
}

func runMigrateTemplate(_ context.Context, c *command, args []string, stdout, _ io.Writer) error {
	flags := c.flagSet()
	dialect := flags.String("dialect", "", "postgres, or mysql for MariaDB and MySQL (required)")
	table := flags.String("table", "", "existing table to add the columns to, optionally schema-qualified (required with --version-column or --fencing-column)")
	versionCol := &optionalName{def: migrations.DefaultVersionColumn}
	fencingCol := &optionalName{def: migrations.DefaultFencingColumn}
	fenceTable := &optionalName{def: migrations.DefaultFenceTable}
	sequences := &optionalName{def: migrations.DefaultFenceSequence, list: true}
	shardTable := flags.String("shard-table", "", "create a shard table for a hotrow.Sharded counter (columns id, shard, v), optionally schema-qualified")
	flags.Var(versionCol, "version-column", "add an optimistic-locking version column (bare: \""+migrations.DefaultVersionColumn+"\"; --version-column=NAME)")
	flags.Var(fencingCol, "fencing-column", "add a fencing-token column (bare: \""+migrations.DefaultFencingColumn+"\"; --fencing-column=NAME)")
	flags.Var(fenceTable, "fence-table", "create a fence table for fencedpg.Admit / fencedmysql.Admit (bare: \""+migrations.DefaultFenceTable+"\"; --fence-table=NAME)")
	flags.Var(sequences, "sequence", "create a token sequence; repeatable (bare: \""+migrations.DefaultFenceSequence+"\"; distlock/pglock uses \""+migrations.DefaultLockSequence+"\")")
	lockTimeout := flags.Duration("lock-timeout", migrations.DefaultLockTimeout, "how long each statement may wait for a table lock before the migration fails")
	numbering := flags.String("numbering", "timestamp", "version numbering: timestamp (UTC YYYYMMDDhhmmss) or sequential (after the highest version in --out)")
	version := flags.String("version", "", "explicit migration version, instead of --numbering")
	title := flags.String("title", "", "migration title (default: concurkit_<table>, or concurkit_fencing)")
	out := flags.String("out", "", "directory to write the two files into, created if missing (default: print them)")
	if err := c.parse(flags, args, stdout); err != nil {
		return err
	}
	d, err := migrations.ParseDialect(*dialect)
	switch {
	case *dialect == "":
		return c.flagErr("dialect", "required (postgres or mysql)")
	case err != nil:
		return c.flagErr("dialect", "unknown dialect %q (postgres, or mysql for MariaDB and MySQL)", *dialect)
	case versionCol.value() == "" && fencingCol.value() == "" && fenceTable.value() == "" && *shardTable == "" && len(sequences.values) == 0:
		return usagef(c.name, "concurkit migrate template: nothing to generate: give --version-column, --fencing-column, --fence-table, --shard-table or --sequence")
	case (versionCol.value() != "" || fencingCol.value() != "") && *table == "":
		return c.flagErr("table", "required with --version-column or --fencing-column")
	case *table != "" && versionCol.value() == "" && fencingCol.value() == "":
		return c.flagErr("table", "given without --version-column or --fencing-column")
	case isSet(flags, "version") && isSet(flags, "numbering"):
		return c.flagErr("version", "cannot be combined with --numbering")
	}
	o := migrations.TemplateOptions{
		Dialect: d, Table: *table,
		VersionColumn: versionCol.value(), FencingColumn: fencingCol.value(),
		FenceTable: fenceTable.value(), ShardTable: *shardTable, Sequences: sequences.values,
		LockTimeout: *lockTimeout, Title: *title,
	}
	switch {
	case *version != "":
		v, err := strconv.ParseUint(*version, 10, 64)
		if err != nil || v == 0 {
			return c.flagErr("version", "must be a positive integer, got %q", *version)
		}
		o.Version = v
	case *numbering == "timestamp":
		o.Version = migrations.TimestampVersion(time.Now())
	case *numbering == "sequential":
		if *out == "" {
			return c.flagErr("numbering", "sequential needs --out DIR, the migration directory to number after")
		}
		o.Version, o.Digits, err = migrations.NextSequential(os.DirFS(*out))
		if errors.Is(err, fs.ErrNotExist) {
			o.Version, o.Digits, err = 1, migrations.DefaultDigits, nil
		}
		if err != nil {
			return c.flagErr("out", "%v", err)
		}
	default:
		return c.flagErr("numbering", "must be timestamp or sequential, got %q", *numbering)
	}
	if *lockTimeout <= 0 {
		return c.flagErr("lock-timeout", "must be positive, got %s", *lockTimeout)
	}
	files, err := migrations.Template(o)
	if err != nil {
		return templateFlagErr(c, err)
	}
	if *out == "" {
		for _, f := range []struct{ name, body string }{{files.UpName, files.Up}, {files.DownName, files.Down}} {
			fmt.Fprintf(stdout, "-- %s\n%s\n", f.name, f.body)
		}
		return nil
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, f := range []struct{ name, body string }{{files.UpName, files.Up}, {files.DownName, files.Down}} {
		p := filepath.Join(*out, f.name)
		// O_EXCL: never overwrite a migration that already exists.
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, werr := io.WriteString(fh, f.body)
		if err := errors.Join(werr, fh.Close()); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "wrote", p)
	}
	return nil
}

// templateFields maps the TemplateOptions fields that migrations.Template
// names in its errors to this command's flags (longer names first: the
// replacer tries them in this order).
var templateFields = strings.NewReplacer(
	"migrations: ", "",
	"VersionColumn", "--version-column",
	"FencingColumn", "--fencing-column",
	"FenceTable", "--fence-table",
	"ShardTable", "--shard-table",
	"Sequences", "--sequence",
	"LockTimeout", "--lock-timeout",
	"Table", "--table",
	"Title", "--title",
	"Version", "--version",
	"Digits", "--out (zero-padding)",
)

// templateFlagErr turns Template's bad-option error into a usage error
// naming the flag.
func templateFlagErr(c *command, err error) error {
	if !errors.Is(err, concurkit.ErrInvalidArgument) {
		return err
	}
	msg := strings.TrimPrefix(err.Error(), concurkit.ErrInvalidArgument.Error()+": ")
	return usagef(c.name, "concurkit %s: %s", c.name, templateFields.Replace(msg))
}
