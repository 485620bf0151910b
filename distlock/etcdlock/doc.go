// Package etcdlock implements distlock.Locker on etcd v3 with one key per
// contender on a session lease, in the manner of etcd's concurrency.Mutex
// but without its always-on keep-alive goroutine:
//
//   - The acquisitions of one Locker that ask for the same TTL (in whole
//     seconds) share a session: one etcd lease, granted on first use,
//     renewed by the acquisitions themselves (when its last renewal is
//     older than a tenth of their validity), by Extend and by waiting
//     contenders, and left to expire on the server when unused. Granting
//     and revoking a lease per acquisition would cost two more raft writes
//     than the lock itself.
//   - Acquire, in one transaction, puts <prefix><escaped key>/<session
//     lease id>-<n> (n is a number no other live lease of the session
//     holds, so each acquisition has a key of its own; a released lease's
//     number is reused, because etcd keeps every deleted key's index until
//     a compaction and a fresh name per acquisition made each read of a
//     busy key's contenders slower than the last; cleanups delete only
//     their own generation of a name) attached to the session's lease and reads the key
//     with the lowest CreateRevision under <prefix><escaped key>/. If that
//     is ours, the lock is held.
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
// up (1.2s → 2s) without overflow; TTLs above MaxTTL (etcd's limit of
// 9,000,000,000 s) are rejected as bad input (concurkit.ErrInvalidArgument).
// etcd may
// raise very small TTLs to its own minimum; the lease's local validity is
// the requested TTL, and never more than the TTL the server granted (read
// from the grant's response). Once the lock is held nothing renews the
// lease unless the caller calls Extend or sets AutoExtend (no hidden
// watchdog), so a paused process loses it after TTL. The lease's context is
// cancelled (cause matching distlock.ErrLeaseLost) when that validity,
// minus clock drift and a safety margin, has passed since the last grant or
// renewal, when a renewal reports the lease gone, or when a watch sees the
// lock key deleted (lease revoked or expired on the server, key deleted by
// an operator).
//
// # Frozen members and request timeouts
//
// A frozen etcd member (SIGSTOP, a paused VM, a hung disk) keeps its
// connections open and answers nothing, and clientv3 puts no deadline of
// its own on a request: without one, a request routed to that member
// waits until the member resumes. The Locker therefore bounds every
// request it sends by Config.RequestTimeout (default
// DefaultRequestTimeout, 5 s) on top of the caller's context, and each
// lease renewal also by a third of the lease's TTL (so AutoExtend can retry
// on another member before the lease runs out). Acquire retries requests
// that time out or find no leader until its context ends; a waiting
// contender re-reads its predecessors after every renewal, since a watch
// held by a frozen member never fires. TryAcquire, Extend and Release make
// one bounded attempt. A plain clientv3.Config{Endpoints: ...} is enough;
// DialKeepAliveTime/DialKeepAliveTimeout on the client additionally let
// its balancer drop a frozen member's connection sooner.
//
// Measured with default clients (TestFrozenMember): with the only member,
// the leader or a follower frozen, every call returns within its context's
// deadline or the request timeout; a held AutoExtend lease with a 3 s TTL
// survives a frozen leader or follower (the new leader extends leases when
// it is elected) and is reported lost at the end of its validity when the
// only member is frozen, before the server could hand the lock to anyone.
//
// # Keys
//
// A key must be valid UTF-8 and at most MaxKeyLen (1024) bytes; otherwise
// Acquire and TryAcquire return distlock.ErrInvalidKey before any request.
// The key is stored as url.PathEscape(key) ('/' and every byte outside the
// URL path alphabet percent-encoded, '%' included), so distinct keys never
// share a lock and no key is a prefix of another key's directory.
//
// # Release and cleanup
//
// Release deletes the lease's own key (its name is unique to the
// acquisition: it can never delete a successor's lock), not the session's
// lease. The deletion is bounded by the deadline of the context it runs
// with and by the request timeout (also when that context has none). A
// lease that is lost or expires has its key deleted too, in the
// background: its session may live on, renewed by other holders. The
// cleanup of an abandoned acquisition (a lost response leaves the put
// unknown: deleting the key covers both) runs in the background (bounded
// by the request timeout), so Acquire returns as soon as its context ends;
// the Locker's next attempt on the same key waits for it, so it never
// queues behind its own leftover. If any of these deletions fails (etcd
// unreachable), the session is killed: every lease on it is lost and it is
// never renewed again, so whatever key is left goes with its lease after
// the TTL. Likewise a session found gone on the server (expired while the
// process was paused, revoked) ends every lease on it.
//
// # Use
//
// New(client, *Config) returns a Locker: the client is a *clientv3.Client (go.etcd.io/etcd/client/v3), and
// Config, whose nil value and zero fields are documented defaults, sets the
// key prefix and the request and cleanup timeouts. Acquire and TryAcquire hand out distlock.Leases; distlock.Do
// holds one while a function runs. Install observe.Hooks on the Acquire
// context to see lock waits, extensions (AutoExtend's failures included)
// and lease loss, reported with the package name "etcdlock". The package is
// named <system>lock, like every concurkit lock backend, so it never
// shadows the client library's own package name.
package etcdlock
