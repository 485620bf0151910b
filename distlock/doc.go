// Package distlock defines the contract shared by concurkit's distributed
// lock backends: a Locker hands out Leases, and every Lease carries a
// monotonic fencing token that the package fenced checks in storage.
//
// # Packages
//
// This package is the driver-neutral core: the Locker and Lease
// interfaces, the errors, the Options of one acquisition and Do. It
// imports only the standard library and concurkit's stdlib-only packages,
// so code written against Locker compiles no database or lock-service
// client. Each backend is a subpackage named <system>lock, after the
// system it runs on, so it never shadows that system's own client package
// and needs no import alias:
//
//	distlock/redislock   one Redis server (go-redis)
//	distlock/redlock     N independent Redis masters (the Redlock algorithm)
//	distlock/etcdlock    etcd v3
//	distlock/zklock      Apache ZooKeeper
//	distlock/dynamolock  one DynamoDB item per lock (aws-sdk-go-v2)
//	distlock/pglock      PostgreSQL session advisory locks (pgx v5)
//	distlock/distlocktest  the conformance suite, for tests of any Locker
//
// Every backend has one constructor, New(client, *Config) (*Locker,
// error): the client of its system (a go-redis client, the Redlock
// masters, a clientv3 client, the ZooKeeper server list, a DynamoDB
// client, a pgx pool) and a *Config whose nil value, and every zero field,
// means the documented default. The same idea has the same field name in
// every Config: PollMin/PollMax (the backoff of a polling Acquire),
// RequestTimeout (the bound of one request to the server), CleanupTimeout
// (the bound of Release's server-side cleanup), Source (the fenced.Source
// of backends that cannot mint tokens themselves). Bad input — a nil
// client, a negative duration, an empty key — is an error matching
// concurkit.ErrInvalidArgument, returned before any I/O.
//
// # Fencing
//
// A lock with a time-to-live alone cannot guarantee mutual exclusion: a
// process paused by garbage collection, a slow network or a clock jump can
// outlive its lease and write after another holder took over. The fencing
// token closes that gap: storage accepts a write only with a token at least
// as high as any it has seen.
//
// A Lease also tells its holder when to stop: its Context ends, Valid turns
// false and Deadline passes before the server may hand the lock to another
// holder (the TTL minus a clock-drift allowance and a safety margin).
// Valid reads the clock at call time, so it is right even right after a
// pause, when the timer behind Context has not fired yet. These checks end
// work early; they cannot stop a write that a paused process already began,
// which is why the write itself must be fenced.
//
// Do is the one call for "hold a lease while doing this": it acquires,
// runs a function with a context that ends with the lease, and always
// releases; the function writes with lease.Token() through package fenced.
// When the function succeeded but the lease was lost meanwhile or the
// release was unconfirmed, Do returns a *CompletedError, so that a job loop
// that retries failures does not redo completed work.
//
// Release is bounded: its server-side cleanup ignores the cancellation of
// the caller's context (a cancelled request still releases its lock) but
// ends at a cleanup timeout (DefaultCleanupTimeout unless the backend says
// otherwise), and Release returns by the caller's deadline, reporting an
// unconfirmed release (concurkit.ErrOutcomeUnknown) if the cleanup was not
// done by then; the server frees the lock at its TTL at the latest.
//
// # Shutting down
//
// A Locker leaves bounded work running in the background: the cleanup of
// a Release that returned at its caller's deadline, the undoing of an
// acquisition whose caller gave up while its request was in flight (a
// slow or frozen server may apply it afterwards), Redlock's requests to
// slow masters, watchers. Every backend's Locker implements Closer: Close
// releases the leases still held, ends waiting Acquire calls (ErrClosed),
// and waits for all of that, so a process that exits right after leaves
// no lock behind until its TTL. Release every lease, also one that was
// lost: a lost lease stays registered with its Locker until released.
//
// # Observing
//
// Install observe.Hooks on the context given to Acquire (observe.WithHooks)
// to see lock waits (LockWait: an Acquire that could not succeed at once,
// with its wait, attempts and outcome), every extension attempt
// (LeaseExtend, including AutoExtend's failures, which are returned to
// nobody) and lease loss with its cause (LeaseLost). The lease keeps the
// hooks of its Acquire call for its background events. Without hooks
// nothing is reported and nothing is allocated for it. The errors have
// ErrorType names for observe.ErrorType: "not_acquired", "lease_lost",
// "released", "closed", "invalid_key", "token_exhausted".
package distlock
