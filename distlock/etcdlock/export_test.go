package etcdlock

import "context"

// Quiesce waits for the Locker's background work (cleanups, watchers of
// released leases) without closing it.
func (l *Locker) Quiesce(ctx context.Context) error { return l.bg.Wait(ctx) }
