package dynamolock

import "context"

// ReleaseOwner runs the release callback a lease gives internal/lease
// (compare-and-delete on owner), with the context it is given.
func (l *Locker) ReleaseOwner(ctx context.Context, key, owner string) error {
	return l.release(ctx, key, owner)
}
