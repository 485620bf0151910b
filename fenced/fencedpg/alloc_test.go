package fencedpg_test

import (
	"context"
	"testing"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/observe"
)

// TestAcceptedPathAllocations: on the accepted path a guarded write
// allocates exactly what the hand-written statement it replaces allocates
// (the argument slice a pgx call needs): the statement comes from the
// cache, and the hooks are looked up only when a write is refused, so
// installing hooks costs nothing either.
func TestAcceptedPathAllocations(t *testing.T) {
	rec := &recorder{}
	var db fencedpg.DBTX = rec
	ctx := context.Background()
	hooked := observe.WithHooks(ctx, &observe.Hooks{FenceRejected: func(context.Context, observe.FenceEvent) {}})
	set := map[string]any{"amount": int64(5)}
	const handWritten = `UPDATE "accounts" SET "max_seen_token" = $2, "amount" = $3 WHERE "id" = $1 AND "max_seen_token" <= $2`
	const handAdmit = `INSERT INTO "concurkit_fences" AS t ("resource", "max_seen_token") VALUES ($1, $2)
ON CONFLICT ("resource") DO UPDATE SET "max_seen_token" = EXCLUDED."max_seen_token"
WHERE t."max_seen_token" <= EXCLUDED."max_seen_token"`
	resource := string([]byte("mailer")) // not a constant: a caller's variable
	baseline := func(run func() error) float64 {
		return testing.AllocsPerRun(200, func() {
			if err := run(); err != nil {
				t.Fatal(err)
			}
		})
	}
	handUpdate := baseline(func() error { _, err := db.Exec(ctx, handWritten, any(int64(1)), int64(7), set["amount"]); return err })
	handAdmitted := baseline(func() error { _, err := db.Exec(ctx, handAdmit, any(resource), int64(7)); return err })
	for name, c := range map[string]struct {
		base float64
		run  func(ctx context.Context) error
	}{
		"Update": {handUpdate, func(ctx context.Context) error {
			return fencedpg.Update(ctx, db, accounts, int64(1), 7, set)
		}},
		"Write": {handUpdate, func(ctx context.Context) error {
			return fencedpg.Write(ctx, db, accounts, int64(1), 7, set)
		}},
		"Admit": {handAdmitted, func(ctx context.Context) error {
			return fencedpg.Admit(ctx, db, fenced.Fence{}, resource, 7)
		}},
	} {
		base, run := c.base, c.run
		for ctxName, ctx := range map[string]context.Context{"no hooks": ctx, "hooks": hooked} {
			got := testing.AllocsPerRun(200, func() {
				if err := run(ctx); err != nil {
					t.Fatal(err)
				}
			})
			if got != base {
				t.Errorf("%s, %s: %v allocations per call, the hand-written statement %v", name, ctxName, got, base)
			}
		}
	}
}
