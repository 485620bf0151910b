package redlock

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit/distlock/internal/redisnode"
	"github.com/concurkit/concurkit/fenced"
)

// AttemptWithToken runs the acquire script once on every master with a
// caller-chosen token (no minting, no retry, no cleanup), waits for every
// answer (at most 5 s: a test helper, not NodeTimeout) and returns how many masters accepted it
// and how many called it stale.
func (l *Locker) AttemptWithToken(ctx context.Context, key string, ttl time.Duration, tok fenced.Token) (yes, stale int) {
	keys := redisnode.NewKeys(key)
	out := make(chan reply, len(l.nodes))
	all := make([]int, len(l.nodes))
	for i := range all {
		all[i] = i
	}
	rctx := l.ask(ctx, time.Now().Add(5*time.Second), all, func(ctx context.Context, c goredis.Scripter) (int64, error) {
		return l.scripts.Acquire(ctx, c, keys, tok.String()+":test", ttl, tok, DefaultFenceTTL)
	}, out, nil)
	var t tally
	gather(rctx, out, len(all), &t, func(*tally) bool { return false })
	return t.yes, t.stale
}

// Quiesce waits until every request and cleanup the Locker left running
// in the background has returned.
func (l *Locker) Quiesce() { _ = l.bg.Wait(context.Background()) }
