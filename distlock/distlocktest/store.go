package distlocktest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

// Store is the storage a lock protects in the Kleppmann scenario: one
// record, written by lock holders. Implement it to run the scenario on
// your own storage (Options.Store); PostgresStore is the default.
type Store interface {
	// Write stores value guarded by token: it must return an error
	// matching fenced.ErrStaleToken, and store nothing, if a write with a
	// higher token was accepted before.
	Write(ctx context.Context, token fenced.Token, value string) error
	// WriteUnfenced stores value with a plain write that ignores tokens:
	// the negative control.
	WriteUnfenced(ctx context.Context, value string) error
	// Read returns the stored value.
	Read(ctx context.Context) (string, error)
}

// PostgresStore returns a Store on a new table in db's default schema
// (dropped at cleanup), written with fencedpg.Write (the guarded upsert:
// value and max_seen_token in one statement). It fails the test if the
// table cannot be created.
func PostgresStore(t *testing.T, db fencedpg.DBTX) Store {
	t.Helper()
	table := fmt.Sprintf("locktest_%d", rand.Uint32())
	ctx := context.Background()
	if _, err := db.Exec(ctx, fmt.Sprintf(pgTable, table)); err != nil {
		t.Fatalf("locktest: create table: %v", err)
	}
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	return &pgStore{db: db, table: table}
}

const (
	pgTable     = `CREATE TABLE %s (id bigint PRIMARY KEY, value text NOT NULL, max_seen_token bigint NOT NULL DEFAULT 0)`
	pgUnfenced  = `INSERT INTO %s (id, value) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value`
	pgReadValue = `SELECT value FROM %s WHERE id = 1`
)

type pgStore struct {
	db    fencedpg.DBTX
	table string
}

func (s *pgStore) Write(ctx context.Context, token fenced.Token, value string) error {
	return fencedpg.Write(ctx, s.db, fenced.Table{Name: s.table}, 1, token, map[string]any{"value": value})
}

func (s *pgStore) WriteUnfenced(ctx context.Context, value string) error {
	_, err := s.db.Exec(ctx, fmt.Sprintf(pgUnfenced, s.table), value)
	return err
}

func (s *pgStore) Read(ctx context.Context) (string, error) {
	var v string
	err := s.db.QueryRow(ctx, fmt.Sprintf(pgReadValue, s.table)).Scan(&v)
	return v, err
}
