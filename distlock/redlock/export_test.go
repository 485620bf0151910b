package redlock

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/fenced"
)

// AttemptWithToken runs the acquire script once on every master with a
// caller-chosen token (no minting, no retry, no cleanup) and returns how
// many masters accepted it and how many called it stale.
func (l *Locker) AttemptWithToken(ctx context.Context, key string, ttl time.Duration, tok fenced.Token) (yes, stale int) {
	t := count(l.fanout(ctx, func(ctx context.Context, c goredis.Scripter) (int64, error) {
		return l.scripts.Acquire(ctx, c, key, tok.String()+":test", ttl, tok, DefaultFenceTTL)
	}))
	return t.yes, t.stale
}
