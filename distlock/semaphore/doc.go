// Package semaphore is a distributed counting semaphore built on any
// distlock.Locker: at most N holders at once, each with its own fencing
// token, on every concurkit lock backend (and on a Locker of your own).
//
// # How it works
//
// A semaphore of N permits named name is N locks, one per permit, with the
// keys
//
//	name + "/permit/" + i    (i = 0 … N-1)
//
// Holding permit i means holding a lease on key i: New takes the Locker
// and the number of permits, TryAcquire makes one round of
// Locker.TryAcquire over the permits, starting at a random one (so that
// contenders spread over the permits instead of all asking for permit 0
// first), and Acquire repeats rounds, with a jittered backoff between
// them, until it gets a permit or its context ends. The Lease it returns
// is the backend's own: its Key tells which permit it holds, Release gives
// the permit back, Extend, Context, Valid and Deadline behave as for a
// lock of that backend. The semaphore itself holds no state and does no
// I/O of its own: Semaphores with the same name on the same lock service
// (and namespace: the backend's prefix, root or table) share the permits,
// in one process or many. All of them must agree on N: a process that
// believes in more permits uses keys the others never ask for.
//
// # Fencing
//
// Each permit is a lock of its own, with its own fencing tokens: the
// tokens of one permit key are strictly increasing across its holders,
// but tokens of different permits are not comparable (dynamolock counts
// per key, so two permits hand out the same numbers). A permit holder
// therefore fences its writes per permit: the resource (the fenced row,
// or the name given to fencedpg.Admit and its twins) is lease.Key(),
// and the token is lease.Token(). A holder paused past its lease, whose
// permit has gone to another process meanwhile, is then refused by
// storage with fenced.ErrStaleToken, exactly as a lock holder would be.
// The count bounds the holders only as long as each stops when its lease
// ends: a paused holder may still act after its permit passed on, so N+1
// processes can be at work for a moment. Use the count for what tolerates
// that (load on a shared service), and the token of the permit for what
// must not (writes).
//
// # A holder that dies
//
// A permit is freed as its lock is: by Release, or, when its holder died,
// hung or was cut off, when its lease runs out on the server — at its TTL
// (redislock, redlock, dynamolock, etcdlock), when its ZooKeeper session
// expires (zklock) or its PostgreSQL session ends (pglock). A waiting
// Acquire then takes it at its next round: within about one TTL (or
// session timeout) of the holder's last renewal, plus one poll interval.
// (dynamolock judges expiry by the time a waiter itself watched the
// holder's record unchanged, so there it is one TTL after the waiter's
// Locker first saw it.)
//
// # Not FIFO
//
// The semaphore is not fair: a waiter that has polled for a long time has
// no priority over one that just arrived, and under sustained contention
// a waiter can be overtaken again and again. A polling semaphore over
// independent keys cannot queue: no key knows about waiters for another
// key, and a waiter is nowhere but in its own process between rounds.
// Backends that queue waiters on the server (ZooKeeper's sequential lease
// nodes, etcd's revisions) could grant permits in arrival order; that
// would be a backend-specific semaphore, future work.
//
// # Cost
//
// A round asks for each permit in turn until one is free, so a round that
// finds every permit held makes N requests, and W waiters make about
// W·N requests per poll interval (Config.PollMin, PollMax). On etcd and
// ZooKeeper a refused attempt is itself two writes through the quorum
// (the contender's key or node is created, then deleted). Keep N small
// — tens, not thousands — and the poll interval in line with how long a
// permit is held.
//
// # Errors
//
// Bad input (a nil Locker, an empty name, fewer than one permit, a
// negative duration, PollMin above PollMax) is an error matching
// concurkit.ErrInvalidArgument, returned by New before any I/O. TryAcquire
// returns an error matching distlock.ErrNotAcquired when every permit it
// could ask for was held; a permit whose request failed for another
// reason (a server down) is not counted as held, and its error is joined
// to the result, so it is never hidden. When every permit failed that
// way, the joined errors are returned and do not match ErrNotAcquired:
// waiting would not help. Acquire waits while at least one permit was
// merely held.
package semaphore
