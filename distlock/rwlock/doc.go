// Package rwlock is a distributed read-write lock built on any
// distlock.Locker: many readers at once, or one writer, with writer
// preference and a fencing token for the writer, on every concurkit lock
// backend (and on a Locker of your own).
//
//	rw, err := rwlock.New(locker, "catalog", nil)
//	...
//	r, err := rw.RLock(ctx) // alongside other readers
//	defer r.Release(context.WithoutCancel(ctx))
//	...
//	w, err := rw.Lock(ctx) // alone
//	defer w.Release(context.WithoutCancel(ctx))
//	// write through package fenced with w.Token()
//
// # How it works
//
// A lock named name is R+1 locks of the Locker (R = Config.Readers,
// default 16):
//
//	name + "/gate"           the gate
//	name + "/read/" + i      reader slot i (i = 0 … R-1)
//
// A reader queues at the gate (Locker.Acquire), takes one free reader
// slot (one round of Locker.TryAcquire over the slots, from a random one)
// and releases the gate at once; its Read holds the slot's lease alone.
// If every slot is held, it releases the gate, waits a jittered backoff
// (Config.PollMin, PollMax) and queues again: it never holds the gate
// while it waits. At most R readers hold the lock at once.
//
// A writer takes the gate and keeps it, then takes every reader slot:
// the free ones at once (one round of Locker.TryAcquire, in index order),
// then each slot still held, in index order, with a blocking
// Locker.Acquire. Its Write holds the gate and all R slots. Readers and the writer exclude each other through
// the slots: a reader holds one, the writer all of them, so the two can
// never both hold the lock while their leases last. The gate orders them:
// once a writer holds it, no new reader can take a slot.
//
// RWLocks with the same name on the same lock service (and namespace:
// the backend's prefix, root or table) share the lock, in one process or
// many, and must agree on R.
//
// # Writer preference, and the bound on a writer's wait
//
// A writer that holds the gate gets in after the readers already inside
// release their slots — each at the end of its own critical section, or,
// if a reader died or was cut off, when its lease runs out on the server
// (about one TTL after its last renewal; its session's end on ZooKeeper
// and PostgreSQL). Readers arriving after the writer took the gate wait
// behind it, however many there are: a continuous stream of readers
// cannot starve a writer, since the stream stops at the gate. While it
// waits, Lock extends the leases it took every TTL/3 (even without
// Config.AutoExtend), so that a long wait does not cost it the gate.
//
// Before that, the writer queues at the gate with everyone else. A
// reader holds the gate only for one round of requests, so the gate is
// free most of the time; in which order the gate's waiters get it is the
// backend's: arrival order on etcd and ZooKeeper, which queue waiters on
// the server, the next poll to find it free on the others (redislock,
// redlock, dynamolock, pglock), which is not fair. Writers take turns at
// the gate the same way.
//
// # Fencing
//
// The writer's token (Write.Token) is the token of its gate lease:
// strictly increasing across the writers of the lock. Write through
// package fenced with it — fencedpg.Write or Admit with the lock's name
// as the resource, say — so that a writer paused past its TTL, whose
// lock passed to another writer meanwhile, is refused by storage
// (fenced.ErrStaleToken) once its successor wrote. Its Context ends, and
// Valid turns false, before the backend may hand its gate or a slot to
// anyone else; those checks stop work early, the fence is the guard.
//
// A reader must not write what the lock protects. Its token
// (Read.Token) is its slot lease's: it orders the holders of that slot
// and nothing else. Never pass it to the writers' fence: on a backend
// that draws every key's tokens from one sequence (pglock, redislock and
// redlock with a shared source, etcd revisions, ZooKeeper zxids) a
// reader's token can be above the next writer's, and the fence would
// refuse the writer. What a reader read under a lock it lost (paused
// past its TTL while a writer wrote) may be stale: re-check the Read's
// Valid before acting on it, or version what it read (package
// optimistic).
//
// # Upgrading
//
// A read lock cannot be upgraded in place: a writer waits for every
// slot, its own reader's too, forever. An *RWLock remembers the holds it
// handed out and has not seen released, and refuses at once, without any
// I/O, a Lock while it holds a read (ErrUpgrade) and a Lock or RLock
// while it holds the write (ErrReentrant). It cannot tell goroutines
// apart — give every participant that reads and writes on its own its
// own *RWLock (New does no I/O) — and it knows nothing of other *RWLocks
// or processes: a process that holds a read through one *RWLock and asks
// for the write through another waits for its own read until that
// read's lease runs out (with AutoExtend, until Lock's context ends).
// The way to upgrade is: release the read, Lock, then read again what
// the decision to write rested on — another writer may have come in
// between.
//
// # Cost
//
// A reader makes at least three requests (the gate, a slot, the gate's
// release) plus one to release its slot; a writer R+1 acquisitions, one
// after the other, and R+1 releases. On pglock each lease holds a pool
// connection: a writer holds R+1 connections, so size the pool above
// that (pgxpool's default is max(4, NumCPU)), or choose a small R. Keep R
// to the readers you need at once: tens, not thousands (New refuses more
// than MaxReaders).
//
// # Errors
//
// Bad input (a nil Locker, an empty name, Readers out of range, a
// negative duration, PollMin above PollMax) is an error matching
// concurkit.ErrInvalidArgument, returned by New before any I/O. RLock and
// Lock return errors.Join(distlock.ErrNotAcquired, ctx.Err()) when their
// context ends first, leaving nothing held; a Lock that fails releases
// the gate and the slots it took (see Lock).
package rwlock
