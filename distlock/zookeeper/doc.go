// Package zookeeper implements distlock.Locker on Apache ZooKeeper with the
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
// per-lock TTL. distlock.Options.TTL is therefore mapped to the session
// timeout: the Locker keeps one session per distinct TTL (the server clamps
// it to [2, 20] × tickTime by default) and the session's heartbeats keep
// every lease of that session alive, so Extend only verifies that the lease
// still holds and AutoExtend is not needed (it is accepted and ignored).
//
// A lease's context is cancelled (cause matching distlock.ErrLeaseLost)
// when its session is expired by the server, when its znode is deleted by
// someone else, and also as soon as the connection to ZooKeeper is lost:
// while disconnected the client cannot know whether the server has already
// expired the session (this is Curator's "SUSPENDED means you may no longer
// hold the lock"). Waiters survive disconnections: they resume watching
// after reconnecting with the same session and start over with a new node
// if the session expired.
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
// block the lock for everybody. Release waits up to one session timeout for
// the reconnection; after that, and for abandoned waits at once, a
// background reaper deletes the node as soon as the client is back on the
// same session (if the session expired instead, the server deleted it).
// Close waits for the reapers. A lease lost to a disconnection gives its
// node up the same way, whether or not the holder calls Release: once the
// holder has been told it may have lost the lock, the node would only block
// the waiters.
//
// After reconnecting with the same session, new requests wait until the
// client has re-sent its watches (at most 50 ms): go-zookeeper v1.0.4 reads
// and writes Conn.lastZxid without synchronisation around that request
// (go-zookeeper/zk#35), which the race detector reports otherwise.
//
// # Keys and paths
//
// A key becomes one znode name with url.PathEscape ('/' and every byte
// outside the URL path alphabet are percent-encoded), so "a" and "a/b" are
// distinct locks; "." and ".." are rejected with distlock.ErrInvalidKey.
// The go-zookeeper client's calls take no context: the caller's context
// bounds the waits, not an individual request.
package zookeeper
