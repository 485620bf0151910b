package redislock

import (
	"context"
	"time"

	"github.com/concurkit/concurkit/distlock/internal/redisnode"
	"github.com/concurkit/concurkit/fenced"
)

// AttemptWithToken runs the acquire script once with a caller-chosen token
// (no minting, no retry) and returns its raw answer: 1 acquired, 0 busy,
// -1 stale token. Tests use it to show the highest-token check.
func (l *Locker) AttemptWithToken(ctx context.Context, key string, ttl time.Duration, tok fenced.Token) (int64, error) {
	return l.scripts.Acquire(ctx, l.client, redisnode.NewKeys(key), tok.String()+":test", ttl, tok, DefaultFenceTTL)
}

// Quiesce waits until every request and cleanup the Locker left running
// in the background has returned.
func (l *Locker) Quiesce() { _ = l.bg.Wait(context.Background()) }
