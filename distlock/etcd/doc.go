// Package etcd implements distlock.Locker on etcd v3 with one lease and
// one key per contender, in the manner of etcd's concurrency.Mutex but
// without its always-on keep-alive session:
//
//   - Acquire grants a fresh etcd lease (TTL rounded up to whole seconds)
//     and, in one transaction, puts <prefix><escaped key>/<lease id>
//     attached to it and reads the key with the lowest CreateRevision under
//     <prefix><escaped key>/. If that is ours, the lock is held.
//   - Otherwise it waits, one watch at a time, for the deletion of the last
//     key created before ours (no herd), keeping its own lease alive while
//     waiting.
//   - Each check of the predecessors also re-reads its own key in the same
//     transaction, and the lock is held only if that key still exists and
//     is attached to its lease. A contender whose lease expired while
//     it waited (Jepsen's etcd 3.4.3 analysis, etcd issue #11456: the lock
//     call returned after the lease was gone) gets distlock.ErrLeaseLost
//     instead of a lock it does not hold.
//
// # Fencing token
//
// The token is the CreateRevision of the holder's key, read from the key
// itself. etcd revisions are global and strictly increasing and keys are
// granted in creation order, so tokens of one key increase in acquisition
// order. (The response header's revision equals it only when there was no
// wait.)
//
// # TTL and lease loss
//
// distlock.Options.TTL becomes the etcd lease TTL in whole seconds, rounded
// up (1.2s → 2s); etcd may raise very small TTLs to its own minimum. Once
// the lock is held nothing renews the lease unless the caller calls Extend
// or sets AutoExtend (no hidden watchdog), so a paused process loses it
// after TTL. The lease's context is cancelled (cause matching
// distlock.ErrLeaseLost) when the requested TTL, minus clock drift and a
// safety margin, has passed since the last grant or renewal, when a renewal
// reports the lease gone, or when a watch sees the lock key deleted (lease
// revoked or expired on the server, key deleted by an operator).
//
// Release revokes the lease, which deletes only keys attached to it: it can
// never delete a successor's lock. A lease per acquisition also makes a
// lost response harmless: cleanup revokes the lease whether or not the put
// was applied.
package etcd
