package idempotencypg_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencypg"
	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
)

// countingDB counts the statements (round trips) sent through it and
// remembers their texts.
type countingDB struct {
	idempotencypg.DBTX
	mu    sync.Mutex
	n     int
	texts []string
}

func (c *countingDB) count(sql string) {
	c.mu.Lock()
	c.n++
	c.texts = append(c.texts, sql)
	c.mu.Unlock()
}

func (c *countingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.count(sql)
	return c.DBTX.Exec(ctx, sql, args...)
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.count(sql)
	return c.DBTX.Query(ctx, sql, args...)
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.count(sql)
	return c.DBTX.QueryRow(ctx, sql, args...)
}

func (c *countingDB) reset() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, texts := c.n, c.texts
	c.n, c.texts = 0, nil
	return n, texts
}

// TestClaimSeesRowCommittedAfterItsSnapshot forces the one race the claim
// statement cannot answer alone: another claim inserts the key and commits
// after this statement took its snapshot. The statement waits on the
// unique index, finds the row locked by a live run (ON CONFLICT ... WHERE
// false), and its snapshot has no row to return; Claim must then read the
// row and answer "in progress", never "created".
func TestClaimSeesRowCommittedAfterItsSnapshot(t *testing.T) {
	ctx := t.Context()
	_, pool := migrated(t)
	db := &countingDB{DBTX: pool}
	s, err := idempotencypg.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := idemtest.NewClock()
	opts := &idempotency.Options{TTL: time.Hour, LockTimeout: time.Minute, Now: clock.Now}
	// The other claim, uncommitted: the row as Claim inserts it.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	fp := sha256.Sum256([]byte("req"))
	now := clock.Now()
	if _, err := tx.Exec(ctx, `INSERT INTO concurkit_idempotency_keys (principal, idempotency_key, fingerprint, lock_id,
		attempts, locked_at, recovery_point, created_at, last_run_at, expires_at) VALUES ('', 'k1', $1, 42, 1, $2, 'started', $2, $2, $3)`,
		fp[:], now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ran := false
	go func() {
		_, _, err := idempotency.Do(ctx, s, "", "k1", []byte("req"), opts, func(context.Context) (int, error) { ran = true; return 1, nil })
		done <- err
	}()
	// Wait until the claim is blocked behind the uncommitted insert.
	pid := tx.Conn().PgConn().PID()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim never waited for the other insert")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, idempotency.ErrInProgress) || ran {
		t.Fatalf("claim after the other committed: %v (fn ran: %v), want ErrInProgress", err, ran)
	}
	n, texts := db.reset()
	var starts []string
	for _, s := range texts {
		starts = append(starts, s[:min(len(s), 12)]+"…")
	}
	if n != 2 || !strings.HasPrefix(texts[0], "WITH cur AS") || !strings.HasPrefix(texts[1], "SELECT ") {
		t.Fatalf("%d statements %q, want the claim then the read", n, starts)
	}
}
