// Package zklock implements distlock.Locker on Apache ZooKeeper with the
// classic lock recipe: every contender creates an ephemeral sequential znode
// under /<root>/<key>/; the lowest sequence number holds the lock and every
// waiter watches only its immediate predecessor, so a release wakes exactly
// one waiter (no herd effect).
//
// # Fencing token
//
// The token of a lease is the czxid of the holder's znode: the zxid of the
// transaction that created it. Zxids are totally ordered across the whole
// ensemble (the high 32 bits are the leader epoch), and lock nodes are
// acquired in creation order, so tokens of one key are strictly increasing
// in acquisition order, across leader elections and even if the key's
// parent node is deleted and recreated (sequence numbers would restart;
// zxids never do).
//
// # Sessions, TTL and lease loss
//
// A ZooKeeper lock lives as long as the client's session: ZooKeeper has no
// per-lock TTL. distlock.Options.TTL is therefore the requested session
// timeout, in whole milliseconds (rounded up; at most MaxTTL, the int32 of
// milliseconds the protocol carries, else bad input matching
// concurkit.ErrInvalidArgument). The
// server clamps it to its [minSessionTimeout, maxSessionTimeout] (by default
// 2 to 20 ticks) and the client reads the granted timeout from the
// server's answer. The session's heartbeats keep every lease of that
// session alive, so Extend only verifies that the lease still holds and
// AutoExtend is not needed (it is accepted and ignored).
//
// A Locker uses one session per session timeout in use by a lease or a
// waiting acquisition; a request whose TTL equals the timeout a server
// granted to an open session shares that session. When no session is in
// use the Locker keeps the last one for the next acquisition and closes
// any other, so its connections are bounded by the number of distinct TTLs
// held at once (at least one).
//
// A lease's context is cancelled (cause matching distlock.ErrLeaseLost)
// when its session is expired by the server, when its znode is deleted by
// someone else, and also as soon as the connection to ZooKeeper is lost:
// while disconnected the client cannot know whether the server has already
// expired the session (this is Curator's "SUSPENDED means you may no longer
// hold the lock"). A server that stops answering (frozen, partitioned)
// counts as lost after two thirds of the granted session timeout, when the
// client gives the connection up, which is before the server can expire
// the session and hand the lock to a successor. Waiters survive
// disconnections: they resume watching after reconnecting with the same
// session and start over with a new node if the session expired.
//
// The go-zookeeper client's calls take no context. Acquire therefore runs
// the attempt on its own goroutine and returns as soon as its context ends
// (the attempt then removes its node, or releases a lease it got too late,
// by itself; the Locker's next attempt on the key waits for that).
// TryAcquire takes at most one session timeout (at least one second), e.g.
// when no server answers. Extend and Release wait for ZooKeeper no longer
// than their context, and no longer than the client's receive timeout
// either (two thirds of the session timeout, after which it closes a
// silent connection).
//
// # Lost create responses
//
// A create whose response is lost (the connection drops after the server
// applied it) would leave an orphan node that blocks the lock until the
// session ends. As in Apache Curator, lock nodes are "protected": their name
// starts with "_c_<random GUID>-", so after reconnecting with the same
// session the contender finds its own node among the children instead of
// creating a second one. If the session changed meanwhile the node cannot
// exist any more and a fresh GUID is used.
//
// # Release
//
// Releasing deletes only the lease's own znode (exact path and version), so
// it can never delete a successor's lock. A delete that cannot reach
// ZooKeeper (a release, or the cleanup of an abandoned wait, during a
// disconnection) is not dropped: while the session survives, its node would
// block the lock for everybody. A background reaper deletes the node as
// soon as the client is back on the same session (if the session expired
// instead, the server deleted it). Release does not wait for that: a lease
// whose client is disconnected is lost already, and Release returns at
// once with an error matching distlock.ErrLeaseLost. A lease lost to a
// disconnection gives its node up the same way, whether or not the holder
// calls Release: once the holder has been told it may have lost the lock,
// the node would only block the waiters. Close waits for the reapers.
//
// After reconnecting with the same session, new requests wait until the
// client has re-sent its watches (at most 50 ms): go-zookeeper v1.0.4 reads
// and writes Conn.lastZxid without synchronisation around that request
// (go-zookeeper/zk#35), which the race detector reports otherwise. One
// window is left: on a new session's first connection that step has
// nothing to send and cannot be seen from outside, so a reply that
// registers a watch before the client's loop reaches it (that goroutine
// descheduled for a whole round trip) still trips the report; only a fix
// in go-zookeeper closes it.
//
// # Keys and paths
//
// A key must be valid UTF-8 and at most MaxKeyLen (1024) bytes; "." and
// ".." are refused (ZooKeeper paths have no relative components), and so is
// "zookeeper" when Config.Root is "/" (the server's own subtree). Such keys
// return distlock.ErrInvalidKey before any I/O. (Without the bound, a
// request above the server's jute.maxbuffer, 1 MB by default, makes the
// server drop the connection, and with it every lease of the session.) A
// valid key becomes
// one znode name with url.PathEscape ('/', '%', control characters and
// every non-ASCII byte are percent-encoded), so "a" and "a/b" are distinct
// locks and every name consists of characters ZooKeeper stores as they
// are. Config.Root must be a valid ZooKeeper path (no NUL or control
// characters, no characters outside the Basic Multilingual Plane, no empty,
// "." or ".." components, outside /zookeeper, at most 1024 bytes).
//
// # Use
//
// New(client, *Config) returns a Locker: the client is the list of ZooKeeper servers ("host:port"): the Locker
// opens its own sessions, one per session timeout in use, since a lock
// lives as long as the session that created it (see New), and
// Config, whose nil value and zero fields are documented defaults, sets the
// root path, ACL, dialer, logger and cleanup timeout. Acquire and TryAcquire hand out distlock.Leases; distlock.Do
// holds one while a function runs. Install observe.Hooks on the Acquire
// context to see lock waits, extensions (AutoExtend's failures included)
// and lease loss, reported with the package name "zklock". The package is
// named <system>lock, like every concurkit lock backend, so it never
// shadows the client library's own package name.
package zklock
