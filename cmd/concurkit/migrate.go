package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/concurkit/concurkit/internal/redact"
	"github.com/concurkit/concurkit/migrations"
)

const migrateUsage = `usage:
  concurkit migrate template --dialect postgres|mysql --table T [--version-column[=NAME]] [--fencing-column[=NAME]] [--out DIR]
  concurkit migrate up|down  --dialect postgres|mysql --dsn DSN
`

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, migrateUsage)
		return errors.New("migrate: missing subcommand")
	}
	switch args[0] {
	case "template":
		return runMigrateTemplate(args[1:], stdout, stderr)
	case "up", "down":
		return runMigrateApply(ctx, args[0], args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, migrateUsage)
		return nil
	}
	fmt.Fprint(stderr, migrateUsage)
	return fmt.Errorf("migrate: unknown subcommand %q", args[0])
}

// optionalName is a flag that may be given bare (--version-column, meaning
// the default name) or with a value (--version-column=rev).
type optionalName struct {
	def, value string
}

func (o *optionalName) String() string   { return o.value }
func (o *optionalName) IsBoolFlag() bool { return true }
func (o *optionalName) Set(s string) error {
	switch s {
	case "true":
		o.value = o.def
	case "false":
		o.value = ""
	default:
		o.value = s
	}
	return nil
}

func runMigrateTemplate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate template", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dialect := fs.String("dialect", "", "postgres or mysql (required)")
	table := fs.String("table", "", "table to alter, optionally schema-qualified (required)")
	versionCol := &optionalName{def: migrations.DefaultVersionColumn}
	fencingCol := &optionalName{def: migrations.DefaultFencingColumn}
	fs.Var(versionCol, "version-column", "add an optimistic-locking version column (default name \"version\"; --version-column=NAME to rename)")
	fs.Var(fencingCol, "fencing-column", "add a fencing-token column (default name \"max_seen_token\"; --fencing-column=NAME to rename)")
	out := fs.String("out", ".", "directory to write the .up.sql and .down.sql files into")
	version := fs.String("version", "", "migration version (default: current UTC time, YYYYMMDDhhmmss)")
	title := fs.String("title", "", "migration title (default: concurkit_<table>)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("migrate template: unexpected arguments %q", fs.Args())
	}
	v, err := parseVersion(*version)
	if err != nil {
		return err
	}
	files, err := migrations.Template(migrations.TemplateOptions{
		Dialect: migrations.Dialect(*dialect), Table: *table,
		VersionColumn: versionCol.value, FencingColumn: fencingCol.value,
		Version: v, Title: *title,
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for name, body := range map[string]string{files.UpName: files.Up, files.DownName: files.Down} {
		p := filepath.Join(*out, name)
		// O_EXCL: never overwrite a migration that already exists.
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, werr := io.WriteString(f, body)
		if err := errors.Join(werr, f.Close()); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "wrote", p)
	}
	return nil
}

func parseVersion(s string) (uint64, error) {
	if s == "" {
		v, _ := strconv.ParseUint(time.Now().UTC().Format("20060102150405"), 10, 64)
		return v, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("migrate template: --version must be a positive integer, got %q", s)
	}
	return v, nil
}

func runMigrateApply(ctx context.Context, dir string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate "+dir, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dialect := fs.String("dialect", "", "postgres or mysql (required)")
	dsn := fs.String("dsn", "", "database URL (postgres://…) or MySQL DSN (user@tcp(host:port)/db) (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	apply := migrations.Up
	if dir == "down" {
		apply = migrations.Down
	}
	// The migrations package hides the DSN's password in its errors;
	// redact again so that nothing this command prints can show it.
	if err := apply(ctx, migrations.Dialect(*dialect), *dsn); err != nil {
		return redact.Error(err, *dsn)
	}
	v, _, err := migrations.Version(ctx, migrations.Dialect(*dialect), *dsn)
	if err != nil {
		return redact.Error(err, *dsn)
	}
	fmt.Fprintf(stdout, "migrated %s: version %d\n", dir, v)
	return nil
}
