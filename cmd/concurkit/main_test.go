package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/testkit"
)

func TestDemoOneWinnerPerStrategy(t *testing.T) {
	pgURL := testkit.PostgresServerURL(t)
	myDSN := testkit.MySQLServerDSN(t)
	schema := testkit.Name("ck_demo")
	db := testkit.MySQLFor(t, myDSN)
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		if c, err := pgx.Connect(ctx, pgURL); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = c.Close(ctx)
		}
		_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+schema+"`")
	})
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"demo", "--buyers", "64", "--postgres", pgURL, "--mysql", myDSN, "--schema", schema}, &out, &errOut)
	if err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	// One table row per strategy; each must show 1 winner, 63 sold out and
	// stock 0 (the command itself fails otherwise, this checks the report).
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || (f[0] != "postgres" && f[0] != "mariadb") {
			continue
		}
		rows++
		if !strings.Contains(line, "  1  ") || !strings.Contains(line, " 63 ") {
			t.Errorf("unexpected row: %q", line)
		}
	}
	if rows != 7 {
		t.Fatalf("got %d strategy rows, want 7:\n%s", rows, out.String())
	}
}

func TestMigrateTemplateCLI(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(t.Context(), []string{"migrate", "template", "--dialect", "mysql", "--table", "orders", "--version-column", "--fencing-column=fence", "--fence-table", "--sequence", "--lock-timeout", "2s", "--version", "42", "--out", dir}, &out, &out)
	if err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	up, err := os.ReadFile(filepath.Join(dir, "42_concurkit_orders.up.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"SET SESSION lock_wait_timeout = 2;\n",
		"CREATE TABLE `concurkit_fences`",
		"CREATE SEQUENCE `concurkit_fence_token_seq`",
		"ADD COLUMN `version` BIGINT NOT NULL DEFAULT 1, ADD COLUMN `fence` BIGINT NOT NULL DEFAULT 0;",
	} {
		if !strings.Contains(string(up), want) {
			t.Errorf("up file lacks %q:\n%s", want, up)
		}
	}
	// Writing the same version again must not overwrite it.
	if err := run(t.Context(), []string{"migrate", "template", "--dialect", "mysql", "--table", "orders", "--version-column", "--version", "42", "--out", dir}, &out, &out); err == nil {
		t.Error("existing migration overwritten")
	}
}

// TestMigrateTemplateNumbering: --numbering sequential follows the highest
// version in --out (zero-padded like it; 000001 in an empty or missing
// directory); the default is a UTC timestamp.
func TestMigrateTemplateNumbering(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db", "migrations")
	for _, want := range []string{"000001_concurkit_orders.up.sql", "000002_concurkit_orders.up.sql"} {
		var out bytes.Buffer
		if err := run(t.Context(), []string{"migrate", "template", "--dialect", "postgres", "--table", "orders", "--version-column", "--numbering", "sequential", "--out", dir}, &out, &out); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
	}
	var out bytes.Buffer
	before := time.Now().UTC().Format("20060102")
	if err := run(t.Context(), []string{"migrate", "template", "--dialect", "postgres", "--fence-table"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UTC().Format("20060102")
	if !(strings.HasPrefix(out.String(), "-- "+before) || strings.HasPrefix(out.String(), "-- "+after)) || !strings.Contains(out.String(), "_concurkit_fencing.down.sql\n") {
		t.Fatalf("timestamp numbering, printed files:\n%s", out.String())
	}
}
