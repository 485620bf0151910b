// Package multilock locks a set of keys at once on any distlock.Locker:
// a transfer between two accounts, a job that touches three resources, a
// schema change over several tables. It is a recipe on the Locker
// interface alone, so it works on every concurkit backend (redislock,
// redlock, etcdlock, zklock, dynamolock, pglock) and on a Locker of your
// own, and it imports no driver.
//
//	set, err := multilock.Acquire(ctx, locker, []string{"account/7", "account/3"}, nil)
//	if err != nil {
//		return err // nothing is held
//	}
//	defer set.Release(context.WithoutCancel(ctx))
//	// work under set.Context(); write account/3 with set.Token("account/3"),
//	// account/7 with set.Token("account/7")
//
// # Canonical order
//
// Acquire takes one lease per key, one key after the other, in a
// canonical order: the keys sorted byte-wise (sort.Strings) with
// duplicates removed, whatever order the caller gave them in. This is
// what keeps two callers with overlapping sets from deadlocking. Had
// each taken its keys in its own order, one locking {a, b} and the other
// {b, a} could each take its first key and then wait forever for the
// other's — a cycle in the wait-for graph. In one global order a caller
// only ever waits for a key greater than every key it holds; the holder
// of that key, if it waits too, waits for a greater key still, and so on:
// along a chain of waits the keys strictly increase, so the chain never
// comes back to a caller already in it, and no cycle can form. The order is the same in every process that
// uses this package, since it depends only on the key strings. A lock
// taken on one of those keys outside this package (a plain
// Locker.Acquire while holding another key of the same family) steps
// outside the order and can deadlock again.
//
// The price of the order is that a caller holds its first keys while it
// waits for the later ones. Their TTLs run meanwhile: give the set a TTL
// longer than the expected wait, or Options.AutoExtend. A lease that
// ends while Acquire still waits for a later key ends the wait: Acquire
// rolls back and returns an error matching both distlock.ErrNotAcquired
// and the lease's cause (distlock.ErrLeaseLost). Taking the lost key
// again would break the order, so the set is given up instead.
//
// # Rollback
//
// All or nothing: when a key cannot be acquired — the caller's context
// ended, TryAcquire found a key held, the backend failed — the keys
// already taken are released, in reverse order, before Acquire returns,
// so a failed call leaves nothing held. The rollback ignores the
// cancellation of the caller's context (a caller that gave up still
// releases what it took) and is bounded by distlock.DefaultCleanupTimeout.
// The error joins why the acquisition failed (the backend's error, with
// the key), the context's error when it ended, and any release the
// rollback could not confirm (concurkit.ErrOutcomeUnknown: the server
// frees that key at its TTL at the latest).
//
// # Tokens and fencing
//
// A Set holds one lease, and so one fencing token, per key: tokens of a
// key increase from one holder to the next, but tokens of different keys
// are unrelated (some backends count per key, others draw from one
// sequence). Fence every write with the token of the key it touches,
// Set.Token(key), through package fenced: storage of account/3 compares
// tokens of account/3 only. There is no single token for the set; the
// largest token of a set is not above every token another holder of one
// of its keys may have had.
//
// A Set's Context ends when the first of its leases ends, with that
// lease's cause: a Set whose lease of one key was lost no longer excludes
// others from that key, and only the fenced writes of that key stop a
// successor's data being overwritten. Valid reads every lease's clock.
//
// Package distlocktest checks a Locker under this package
// (distlocktest.MultiLock): no two holders of overlapping sets at once,
// no deadlock, rollback on cancellation and on a held key, per-key
// fencing of a holder whose leases expired.
package multilock
