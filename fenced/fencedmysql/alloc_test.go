package fencedmysql_test

import (
	"context"
	"testing"

	"github.com/concurkit/concurkit/fenced/fencedmysql"
	"github.com/concurkit/concurkit/observe"
)

// TestAcceptedPathAllocations: on the accepted path a guarded write
// allocates exactly what the hand-written statement it replaces allocates:
// the statement comes from the cache, and the hooks are looked up only
// when a write is refused, so installing hooks costs nothing either.
func TestAcceptedPathAllocations(t *testing.T) {
	var db fencedmysql.DBTX = &recorder{}
	ctx := context.Background()
	hooked := observe.WithHooks(ctx, &observe.Hooks{FenceRejected: func(context.Context, observe.FenceEvent) {}})
	set := map[string]any{"amount": int64(5)}
	const (
		handUpdate = "UPDATE `accounts` SET `amount` = ?, `max_seen_token` = ? WHERE `id` = ? AND `max_seen_token` <= ?"
		handWrite  = "INSERT INTO `accounts` (`id`, `max_seen_token`, `amount`) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE `amount` = IF(`max_seen_token` <= VALUES(`max_seen_token`), VALUES(`amount`), `amount`), `max_seen_token` = IF(`max_seen_token` <= VALUES(`max_seen_token`), VALUES(`max_seen_token`), `max_seen_token`)"
	)
	allocs := func(run func() error) float64 {
		return testing.AllocsPerRun(200, func() {
			if err := run(); err != nil {
				t.Fatal(err)
			}
		})
	}
	for name, c := range map[string]struct {
		base float64
		run  func(ctx context.Context) error
	}{
		"Update": {
			allocs(func() error {
				_, err := db.ExecContext(ctx, handUpdate, set["amount"], int64(7), any(int64(1)), int64(7))
				return err
			}),
			func(ctx context.Context) error { return fencedmysql.Update(ctx, db, accounts, int64(1), 7, set) },
		},
		"Write": {
			allocs(func() error {
				_, err := db.ExecContext(ctx, handWrite, any(int64(1)), int64(7), set["amount"])
				return err
			}),
			func(ctx context.Context) error { return fencedmysql.Write(ctx, db, accounts, int64(1), 7, set) },
		},
	} {
		for ctxName, ctx := range map[string]context.Context{"no hooks": ctx, "hooks": hooked} {
			if got := allocs(func() error { return c.run(ctx) }); got != c.base {
				t.Errorf("%s, %s: %v allocations per call, the hand-written statement %v", name, ctxName, got, c.base)
			}
		}
	}
}
