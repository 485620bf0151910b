package electionpg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock/election"
	"github.com/concurkit/concurkit/distlock/election/electionpg"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/testkit"
)

func TestNewBoardBadInput(t *testing.T) {
	var typedNil *pgxpool.Pool
	if _, err := electionpg.NewBoard(typedNil, ""); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("NewBoard(typed nil) = %v, want ErrInvalidArgument", err)
	}
	pool := testkit.Postgres(t)
	for _, table := range []string{"a.b.c", "bad\x00name", ".x", "x."} {
		if _, err := electionpg.NewBoard(pool, table); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("NewBoard(%q) = %v, want ErrInvalidArgument", table, err)
		}
	}
}

// TestBoard: a custom schema-qualified table; the fence refuses a stale
// term's proclamation and vacation; an unknown election has no leader.
func TestBoard(t *testing.T) {
	pool := testkit.Postgres(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS board_test;
		CREATE TABLE board_test.leaders (name text PRIMARY KEY, term bigint NOT NULL DEFAULT 0,
			value text NOT NULL DEFAULT '', vacated boolean NOT NULL DEFAULT false)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA board_test CASCADE") })
	b, err := electionpg.NewBoard(pool, "board_test.leaders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Leader(ctx, "e"); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader of an unknown election = %v, want ErrNoLeader", err)
	}
	if err := b.Vacate(ctx, "e", 1); !errors.Is(err, fenced.ErrNotFound) {
		t.Errorf("Vacate of an unknown election = %v, want fenced.ErrNotFound", err)
	}
	if err := b.Proclaim(ctx, "e", 7, "seven"); err != nil {
		t.Fatal(err)
	}
	if err := b.Proclaim(ctx, "e", 6, "six"); !errors.Is(err, fenced.ErrStaleToken) {
		t.Errorf("Proclaim with a lower term = %v, want fenced.ErrStaleToken", err)
	}
	if err := b.Vacate(ctx, "e", 6); !errors.Is(err, fenced.ErrStaleToken) {
		t.Errorf("Vacate with a lower term = %v, want fenced.ErrStaleToken", err)
	}
	if l, err := b.Leader(ctx, "e"); err != nil || l != (election.Leader{Term: 7, Value: "seven"}) {
		t.Errorf("Leader = %+v, %v; want term 7 seven", l, err)
	}
	if err := b.Vacate(ctx, "e", 7); err != nil {
		t.Fatal(err)
	}
	if err := b.Proclaim(ctx, "e", 0, "zero"); !errors.Is(err, fenced.ErrInvalidToken) {
		t.Errorf("Proclaim with term 0 = %v, want fenced.ErrInvalidToken", err)
	}
	if l, err := b.Leader(ctx, "e"); err != nil || l != (election.Leader{Term: 7, Value: "seven", Vacated: true}) {
		t.Errorf("Leader after Vacate = %+v, %v", l, err)
	}
	// A board whose record has a term above the lock's tokens (the board
	// shared with another lock backend, a token sequence reset): Campaign
	// is refused by the fence, says why, and resigns: the lock is free.
	l, err := pglock.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := election.New(l, "e", &election.Config{Board: b})
	if err != nil {
		t.Fatal(err)
	}
	if term, err := e.Campaign(ctx, "pg"); !errors.Is(err, fenced.ErrStaleToken) {
		t.Fatalf("Campaign below the board's term = %v (term %v), want fenced.ErrStaleToken", err, term)
	}
	lease, err := l.TryAcquire(ctx, "e", nil)
	if err != nil {
		t.Fatalf("the refused candidate kept the lock: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
