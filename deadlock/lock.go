package deadlock

import (
	"fmt"
	"slices"
)

// Mode is a lock mode.
type Mode uint8

// Lock modes. Shared locks are compatible only with shared locks.
const (
	Shared    Mode = iota + 1 // S: readers
	Exclusive                 // X: writers
)

// String returns "S" or "X".
func (m Mode) String() string {
	switch m {
	case Shared:
		return "S"
	case Exclusive:
		return "X"
	default:
		return fmt.Sprintf("Mode(%d)", uint8(m))
	}
}

func compatible(a, b Mode) bool { return a == Shared && b == Shared }

// TxnID identifies a transaction. In the simulator it is also the
// transaction's timestamp: a smaller ID is an older transaction.
type TxnID uint64

// Resource identifies a lockable item (a row).
type Resource uint64

// Status is the outcome of Acquire.
type Status uint8

// Acquire outcomes.
const (
	Granted Status = iota + 1 // the lock is held now
	Waiting                   // the request is queued; the transaction is blocked
)

// String returns "granted" or "waiting".
func (s Status) String() string {
	switch s {
	case Granted:
		return "granted"
	case Waiting:
		return "waiting"
	default:
		return fmt.Sprintf("Status(%d)", uint8(s))
	}
}

// Grant reports a queued request that became granted.
type Grant struct {
	Txn      TxnID
	Resource Resource
	Mode     Mode
}

type holder struct {
	t    *txnState
	mode Mode
}

type request struct {
	t       *txnState
	mode    Mode
	upgrade bool
}

type lockState struct {
	res     Resource
	holders []holder
	queue   []request
}

type txnState struct {
	id      TxnID
	held    []*lockState
	waitOn  *lockState // nil when not waiting
	waitMod Mode
	mark    uint64 // forward search epoch: reachable from the start
	parent  *txnState
	bmark   uint64 // backward search epoch: reaches the start
	bparent *txnState
}

// LockManager is a strict two-phase-locking lock manager: shared and
// exclusive locks, S→X upgrade, FIFO wait queues and release of all of a
// transaction's locks at once (commit or abort).
//
// Compatibility is checked against the holders and against the requests
// already queued, so a waiting X request blocks S requests that arrive after
// it (no starvation of writers). An upgrade request (S held, X wanted while
// other S holders exist) is queued ahead of ordinary waiters, behind earlier
// upgrades; two transactions upgrading the same resource deadlock, as in
// real databases.
//
// The wait-for graph is implicit: a waiting transaction waits for every
// holder and every earlier queued request on its resource whose mode
// conflicts with its own. FindCycle searches it from one transaction and
// touches only the edges reachable from it.
//
// A zero LockManager is ready to use. It is not safe for concurrent use: the
// simulator drives it from one goroutine.
type LockManager struct {
	locks map[Resource]*lockState
	txns  map[TxnID]*txnState
	freeL []*lockState
	freeT []*txnState
	epoch uint64
	bfs   []*txnState
	bfsB  []*txnState
	buf   []*txnState
	grant []Grant
}

func (m *LockManager) txn(id TxnID) *txnState {
	if t := m.txns[id]; t != nil {
		return t
	}
	if m.txns == nil {
		m.txns = make(map[TxnID]*txnState)
	}
	var t *txnState
	if n := len(m.freeT); n > 0 {
		t = m.freeT[n-1]
		m.freeT = m.freeT[:n-1]
	} else {
		t = new(txnState)
	}
	t.id = id
	m.txns[id] = t
	return t
}

func (m *LockManager) lock(r Resource) *lockState {
	if l := m.locks[r]; l != nil {
		return l
	}
	if m.locks == nil {
		m.locks = make(map[Resource]*lockState)
	}
	var l *lockState
	if n := len(m.freeL); n > 0 {
		l = m.freeL[n-1]
		m.freeL = m.freeL[:n-1]
	} else {
		l = new(lockState)
	}
	l.res = r
	m.locks[r] = l
	return l
}

// Acquire requests a lock on r in mode for txn. It returns Granted when the
// lock is held on return (including when txn already held it in that mode
// or a stronger one, and an S→X upgrade by the sole holder), or Waiting when
// the request has been queued; the transaction then stays blocked until a
// Release of another transaction grants it (reported in that Release's
// result) or until Release(txn) cancels it.
//
// Errors: ErrInvalidMode; ErrAlreadyWaiting if txn already has a queued request.
func (m *LockManager) Acquire(txn TxnID, r Resource, mode Mode) (Status, error) {
	return m.acquire(txn, r, mode, true)
}

// TryAcquire is Acquire without waiting: it grants the lock if that needs no
// wait and otherwise returns false and queues nothing (the no-wait policy).
//
// Errors: ErrInvalidMode; ErrAlreadyWaiting if txn already has a queued request.
func (m *LockManager) TryAcquire(txn TxnID, r Resource, mode Mode) (bool, error) {
	s, err := m.acquire(txn, r, mode, false)
	return s == Granted, err
}

func (m *LockManager) acquire(txn TxnID, r Resource, mode Mode, wait bool) (Status, error) {
	if mode != Shared && mode != Exclusive {
		return 0, ErrInvalidMode
	}
	if t := m.txns[txn]; t != nil && t.waitOn != nil {
		return 0, ErrAlreadyWaiting
	}
	t := m.txn(txn)
	l := m.lock(r)
	for i := range l.holders {
		h := &l.holders[i]
		if h.t != t {
			continue
		}
		if h.mode == Exclusive || mode == Shared {
			return Granted, nil
		}
		// S held, X wanted.
		if len(l.holders) == 1 {
			h.mode = Exclusive
			return Granted, nil
		}
		if !wait {
			return 0, nil
		}
		// Upgrades go ahead of ordinary waiters, behind earlier upgrades:
		// queued behind a writer that waits for our own S lock, the upgrade
		// could never be granted.
		pos := 0
		for pos < len(l.queue) && l.queue[pos].upgrade {
			pos++
		}
		l.queue = slices.Insert(l.queue, pos, request{t: t, mode: Exclusive, upgrade: true})
		t.waitOn, t.waitMod = l, Exclusive
		return Waiting, nil
	}
	if len(l.queue) == 0 && compatibleWithHolders(l, t, mode) {
		l.holders = append(l.holders, holder{t: t, mode: mode})
		t.held = append(t.held, l)
		return Granted, nil
	}
	if !wait {
		if len(l.holders) == 0 && len(l.queue) == 0 {
			m.dropLock(l)
		}
		if len(t.held) == 0 {
			m.dropTxn(t)
		}
		return 0, nil
	}
	l.queue = append(l.queue, request{t: t, mode: mode})
	t.waitOn, t.waitMod = l, mode
	return Waiting, nil
}

func compatibleWithHolders(l *lockState, t *txnState, mode Mode) bool {
	for _, h := range l.holders {
		if h.t != t && !compatible(h.mode, mode) {
			return false
		}
	}
	return true
}

func (m *LockManager) dropLock(l *lockState) {
	delete(m.locks, l.res)
	l.holders = l.holders[:0]
	l.queue = l.queue[:0]
	m.freeL = append(m.freeL, l)
}

func (m *LockManager) dropTxn(t *txnState) {
	delete(m.txns, t.id)
	t.held = t.held[:0]
	t.waitOn = nil
	t.parent = nil
	m.freeT = append(m.freeT, t)
}

// Release ends txn (commit or abort): it cancels its queued request, if
// any, releases every lock it holds and grants the queued requests that
// became compatible, in queue order. It returns those grants (nil if none);
// releasing an unknown transaction is a no-op.
func (m *LockManager) Release(txn TxnID) []Grant {
	g := m.release(txn, nil)
	if len(g) == 0 {
		return nil
	}
	return slices.Clone(g)
}

// release appends the grants to dst (m.grant's storage when dst is nil) and
// returns it; the slice is valid until the next call.
func (m *LockManager) release(txn TxnID, dst []Grant) []Grant {
	if dst == nil {
		dst = m.grant[:0]
	}
	t := m.txns[txn]
	if t == nil {
		return dst
	}
	if l := t.waitOn; l != nil {
		for i, q := range l.queue {
			if q.t == t {
				l.queue = slices.Delete(l.queue, i, i+1)
				break
			}
		}
		t.waitOn = nil
		dst = m.promote(l, dst)
	}
	for _, l := range t.held {
		for i, h := range l.holders {
			if h.t == t {
				l.holders = slices.Delete(l.holders, i, i+1)
				break
			}
		}
		dst = m.promote(l, dst)
	}
	m.dropTxn(t)
	m.grant = dst[:0]
	return dst
}

// promote grants queued requests from the head of l's queue while they are
// compatible, stopping at the first that is not (FIFO).
func (m *LockManager) promote(l *lockState, dst []Grant) []Grant {
	n := 0
	for _, q := range l.queue {
		if q.upgrade {
			if len(l.holders) != 1 || l.holders[0].t != q.t {
				break
			}
			l.holders[0].mode = Exclusive
		} else {
			if !compatibleWithHolders(l, q.t, q.mode) {
				break
			}
			l.holders = append(l.holders, holder{t: q.t, mode: q.mode})
			q.t.held = append(q.t.held, l)
		}
		q.t.waitOn = nil
		dst = append(dst, Grant{Txn: q.t.id, Resource: l.res, Mode: q.mode})
		n++
	}
	if n > 0 {
		l.queue = slices.Delete(l.queue, 0, n)
	}
	if len(l.holders) == 0 && len(l.queue) == 0 {
		m.dropLock(l)
	}
	return dst
}

// Waiting reports the resource and mode txn is queued for, if it is waiting.
func (m *LockManager) Waiting(txn TxnID) (Resource, Mode, bool) {
	t := m.txns[txn]
	if t == nil || t.waitOn == nil {
		return 0, 0, false
	}
	return t.waitOn.res, t.waitMod, true
}

// Held returns the number of locks txn holds.
func (m *LockManager) Held(txn TxnID) int {
	if t := m.txns[txn]; t != nil {
		return len(t.held)
	}
	return 0
}

// Holder is one granted lock on a resource.
type Holder struct {
	Txn  TxnID
	Mode Mode
}

// Holders returns the transactions holding r, in grant order.
func (m *LockManager) Holders(r Resource) []Holder {
	l := m.locks[r]
	if l == nil {
		return nil
	}
	out := make([]Holder, len(l.holders))
	for i, h := range l.holders {
		out[i] = Holder{Txn: h.t.id, Mode: h.mode}
	}
	return out
}

// Queue returns the transactions waiting for r, in queue order.
func (m *LockManager) Queue(r Resource) []Holder {
	l := m.locks[r]
	if l == nil {
		return nil
	}
	out := make([]Holder, len(l.queue))
	for i, q := range l.queue {
		out[i] = Holder{Txn: q.t.id, Mode: q.mode}
	}
	return out
}

// appendBlockers appends the transactions t waits for: the holders and the
// earlier queued requests on its resource whose mode conflicts with t's.
func appendBlockers(t *txnState, dst []*txnState) []*txnState {
	l := t.waitOn
	if l == nil {
		return dst
	}
	for _, h := range l.holders {
		if h.t != t && !compatible(h.mode, t.waitMod) {
			dst = append(dst, h.t)
		}
	}
	for _, q := range l.queue {
		if q.t == t {
			break
		}
		// An upgrade's transaction holds S and was listed above if t
		// wants X.
		if !compatible(q.mode, t.waitMod) && !(q.upgrade && t.waitMod == Exclusive) {
			dst = append(dst, q.t)
		}
	}
	return dst
}

// Blockers returns the transactions txn waits for (its out-edges in the
// wait-for graph), or nil if it is not waiting.
func (m *LockManager) Blockers(txn TxnID) []TxnID {
	t := m.txns[txn]
	if t == nil {
		return nil
	}
	b := appendBlockers(t, nil)
	if len(b) == 0 {
		return nil
	}
	out := make([]TxnID, len(b))
	for i, x := range b {
		out[i] = x.id
	}
	return out
}

// waitersBehind appends the queued requests behind t's own request that
// conflict with it: the wait-for edges into t on its resource. An upgrade
// queued ahead of waiters creates such edges after those waiters checked
// their policy, so wait-die and wound-wait re-examine them.
func (m *LockManager) waitersBehind(txn TxnID, dst []TxnID) []TxnID {
	t := m.txns[txn]
	if t == nil || t.waitOn == nil {
		return dst
	}
	seen := false
	for _, q := range t.waitOn.queue {
		if q.t == t {
			seen = true
			continue
		}
		if seen && !compatible(q.mode, t.waitMod) {
			dst = append(dst, q.t.id)
		}
	}
	return dst
}

// appendWaiters appends the transactions that wait for u: its in-edges.
// They are the conflicting requests queued on the resources u holds and
// the conflicting requests queued behind u's own request.
func appendWaiters(u *txnState, dst []*txnState) []*txnState {
	for _, l := range u.held {
		var um Mode
		for _, h := range l.holders {
			if h.t == u {
				um = h.mode
				break
			}
		}
		for _, q := range l.queue {
			if q.t != u && !compatible(um, q.mode) {
				dst = append(dst, q.t)
			}
		}
	}
	if l := u.waitOn; l != nil {
		behind := false
		for _, q := range l.queue {
			if q.t == u {
				behind = true
				continue
			}
			if behind && !compatible(q.mode, u.waitMod) {
				dst = append(dst, q.t)
			}
		}
	}
	return dst
}

// FindCycle reports a cycle of the wait-for graph through txn: the
// transactions in wait order starting with txn (txn waits for the second,
// ..., the last waits for txn), or nil if there is none. Under detection on
// every wait, a new cycle always passes through the transaction that just
// started waiting, so calling FindCycle for it finds every deadlock.
//
// The search is bidirectional and breadth-first: forward along the waits
// of txn and backward along the waits for txn, always extending the
// smaller frontier, until the two meet (a cycle) or either side runs out
// (none). It touches only edges reachable from txn, and usually far fewer:
// a transaction nobody waits for costs a look at its own locks.
func (m *LockManager) FindCycle(txn TxnID) []TxnID {
	t := m.txns[txn]
	if t == nil || t.waitOn == nil {
		return nil
	}
	m.epoch++
	ep := m.epoch
	t.mark, t.bmark = ep, ep
	t.parent, t.bparent = nil, nil
	fq := append(m.bfs[:0], t)
	bq := append(m.bfsB[:0], t)
	defer func() { m.bfs, m.bfsB = fq[:0], bq[:0] }()
	fi, bi := 0, 0
	for fi < len(fq) && bi < len(bq) {
		if len(fq)-fi <= len(bq)-bi {
			u := fq[fi]
			fi++
			m.buf = appendBlockers(u, m.buf[:0])
			for _, b := range m.buf {
				if b.bmark == ep { // u -> b ->* t
					return joinCycle(u, b)
				}
				if b.mark != ep {
					b.mark, b.parent = ep, u
					if b.waitOn != nil {
						fq = append(fq, b)
					}
				}
			}
		} else {
			v := bq[bi]
			bi++
			m.buf = appendWaiters(v, m.buf[:0])
			for _, w := range m.buf {
				if w.mark == ep { // t ->* w -> v
					return joinCycle(w, v)
				}
				if w.bmark != ep {
					w.bmark, w.bparent = ep, v
					bq = append(bq, w)
				}
			}
		}
	}
	return nil
}

// joinCycle builds the cycle t ->* u -> b ->* t from the forward parents of
// u and the backward parents of b.
func joinCycle(u, b *txnState) []TxnID {
	var cyc []TxnID
	for x := u; x != nil; x = x.parent {
		cyc = append(cyc, x.id)
	}
	slices.Reverse(cyc)
	for x := b; x.bparent != nil; x = x.bparent {
		cyc = append(cyc, x.id)
	}
	return cyc
}

// Check verifies the lock table's invariants and returns a description of
// the first violation wrapped in ErrInvariant, or nil: no resource is held by
// two transactions in incompatible modes, the head of every queue really
// has to wait, and the per-transaction bookkeeping matches the table.
// It is meant for tests; it walks the whole table.
func (m *LockManager) Check() error {
	for r, l := range m.locks {
		for i, a := range l.holders {
			for _, b := range l.holders[i+1:] {
				if a.t == b.t {
					return fmt.Errorf("%w: T%d holds r%d twice", ErrInvariant, a.t.id, r)
				}
				if !compatible(a.mode, b.mode) {
					return fmt.Errorf("%w: r%d held by T%d (%s) and T%d (%s)", ErrInvariant, r, a.t.id, a.mode, b.t.id, b.mode)
				}
			}
			if !slices.Contains(a.t.held, l) {
				return fmt.Errorf("%w: T%d holds r%d but does not list it", ErrInvariant, a.t.id, r)
			}
		}
		if len(l.queue) > 0 {
			q := l.queue[0]
			grantable := compatibleWithHolders(l, q.t, q.mode)
			if q.upgrade {
				grantable = len(l.holders) == 1 && l.holders[0].t == q.t
			}
			if grantable {
				return fmt.Errorf("%w: head of r%d's queue (T%d) is grantable", ErrInvariant, r, q.t.id)
			}
		}
		for _, q := range l.queue {
			if q.t.waitOn != l {
				return fmt.Errorf("%w: T%d queued on r%d but not waiting for it", ErrInvariant, q.t.id, r)
			}
		}
		if len(l.holders) == 0 && len(l.queue) == 0 {
			return fmt.Errorf("%w: empty lock r%d kept", ErrInvariant, r)
		}
	}
	return nil
}
