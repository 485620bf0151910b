package observe

import (
	"context"
	"log/slog"
)

// Slog returns Hooks that log every event to logger (slog.Default() when
// nil): retries, lock waits and conflicts at Debug; a retry budget used up,
// a failed extension, a lost lease and a fencing rejection at Warn. Keys are
// logged as given; wrap the logger's handler if they are sensitive.
func Slog(logger *slog.Logger) *Hooks {
	if logger == nil {
		logger = slog.Default()
	}
	return &Hooks{
		Retry: func(ctx context.Context, e RetryEvent) {
			level, msg := slog.LevelDebug, "concurkit: retrying"
			if e.GaveUp {
				level, msg = slog.LevelWarn, "concurkit: retry budget used up"
			}
			logger.LogAttrs(ctx, level, msg,
				slog.String("package", e.Package), slog.Int("attempt", e.Attempt),
				slog.Duration("delay", e.Delay), slog.Any("error", e.Err))
		},
		LockWait: func(ctx context.Context, e LockWaitEvent) {
			logger.LogAttrs(ctx, slog.LevelDebug, "concurkit: waited for lock",
				slog.String("package", e.Package), slog.String("key", e.Key),
				slog.Duration("wait", e.Wait), slog.Int("attempts", e.Attempts),
				slog.Bool("acquired", e.Err == nil), slog.Any("error", e.Err))
		},
		LeaseExtend: func(ctx context.Context, e LeaseEvent) {
			level, msg := slog.LevelDebug, "concurkit: lease extended"
			if e.Err != nil {
				level, msg = slog.LevelWarn, "concurkit: lease extension failed"
			}
			logger.LogAttrs(ctx, level, msg,
				slog.String("package", e.Package), slog.String("key", e.Key),
				slog.Int64("token", e.Token), slog.Any("error", e.Err))
		},
		LeaseLost: func(ctx context.Context, e LeaseEvent) {
			logger.LogAttrs(ctx, slog.LevelWarn, "concurkit: lease lost",
				slog.String("package", e.Package), slog.String("key", e.Key),
				slog.Int64("token", e.Token), slog.Any("cause", e.Err))
		},
		FenceRejected: func(ctx context.Context, e FenceEvent) {
			logger.LogAttrs(ctx, slog.LevelWarn, "concurkit: stale fencing token rejected",
				slog.String("package", e.Package), slog.String("resource", e.Resource),
				slog.Int64("token", e.Token), slog.Int64("seen", e.Seen))
		},
		Conflict: func(ctx context.Context, e ConflictEvent) {
			logger.LogAttrs(ctx, slog.LevelDebug, "concurkit: version conflict",
				slog.String("package", e.Package), slog.String("table", e.Table))
		},
	}
}
