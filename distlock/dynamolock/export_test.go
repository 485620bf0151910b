package dynamolock

import (
	"context"
	"time"
)

// ReleaseOwner runs the release callback a lease gives distlock/internal/lease
// (compare-and-delete on owner), with the context it is given.
func (l *Locker) ReleaseOwner(ctx context.Context, key, owner string) error {
	return l.release(ctx, key, owner)
}

// Observed returns how many keys l keeps an observation of.
func (l *Locker) Observed() int { return l.observed() }

// PruneAfter sets the least idle time of a pruned observation and the
// size below which observations are never pruned.
func (l *Locker) PruneAfter(d time.Duration, floor int) {
	l.mu.Lock()
	l.pruneAfter, l.minSweep = d, floor
	l.mu.Unlock()
}
