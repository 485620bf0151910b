package etcdlock

import "context"

// Quiesce waits for the Locker's background work (cleanups, watchers of
// released leases) without closing it.
func (l *Locker) Quiesce(ctx context.Context) error { return l.bg.Wait(ctx) }

// DeleteOwn exposes deleteOwn: the guarded delete of one key generation.
func (l *Locker) DeleteOwn(ctx context.Context, key string, createRev int64) (bool, error) {
	return l.deleteOwn(ctx, key, createRev)
}
