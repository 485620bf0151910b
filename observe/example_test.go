package observe_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/concurkit/concurkit/observe"
)

// Install hooks once on a base context (a server's, a job's); every
// concurkit call made with a context derived from it reports to them.
func ExampleWithHooks() {
	ctx := observe.WithHooks(context.Background(), &observe.Hooks{
		Conflict: func(_ context.Context, e observe.ConflictEvent) {
			fmt.Println("conflict on", e.Table)
		},
	})
	// What a concurkit package does when its compare-and-swap loses:
	observe.FromContext(ctx).OnConflict(ctx, observe.ConflictEvent{Package: "optimisticpg", Table: "accounts"})
	// Output: conflict on accounts
}

// Logs and counters at once: WithHooks adds to the hooks already on the
// context, so Slog keeps logging after the counters are installed.
func ExampleWithHooks_nested() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // stable output for the example
			}
			return a
		},
	}))
	var rejected atomic.Int64
	ctx := observe.WithHooks(context.Background(), observe.Slog(logger))
	ctx = observe.WithHooks(ctx, &observe.Hooks{
		FenceRejected: func(context.Context, observe.FenceEvent) { rejected.Add(1) },
	})
	// What a concurkit package does when storage refuses a stale token:
	observe.FromContext(ctx).OnFenceRejected(ctx, observe.FenceEvent{Package: "fencedpg", Resource: "accounts", Token: 11, Seen: 12})
	fmt.Println("rejections counted:", rejected.Load())
	// Output:
	// level=WARN msg="concurkit: stale fencing token rejected" package=fencedpg resource=accounts token=11 seen=12
	// rejections counted: 1
}

func ExampleSlog() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // stable output for the example
			}
			return a
		},
	}))
	ctx := observe.WithHooks(context.Background(), observe.Slog(logger))
	observe.FromContext(ctx).OnLeaseLost(ctx, observe.LeaseEvent{
		Package: "redislock", Key: "order-42", Token: 17, Err: errors.New("distlock: lease lost: validity expired"),
	})
	// Output: level=WARN msg="concurkit: lease lost" package=redislock key=order-42 token=17 cause="distlock: lease lost: validity expired"
}
