package deadlock

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Options configures Simulate. A nil *Options or the zero value means the
// documented defaults; Simulate never modifies the caller's struct.
type Options struct {
	// Policy keeps locking live; default Detect.
	Policy Policy
	// Victim picks the deadlock victim under Detect and DetectPeriodic;
	// default Youngest.
	Victim Victim
	// Concurrency is the most transactions active at once (the
	// multiprogramming level); later arrivals queue for admission.
	// Default 10.
	Concurrency int
	// OpTime is how long a read or write takes once its lock is granted;
	// default 10µs.
	OpTime Time
	// DetectInterval is the period of DetectPeriodic; default 1ms.
	DetectInterval Time
	// LockTimeout is the longest wait under Timeout; default 1ms.
	LockTimeout Time
	// RestartDelay scales the delay before an aborted transaction runs
	// again; default 100µs. Under Detect, DetectPeriodic, WaitDie and
	// WoundWait, whose timestamps guarantee progress (see the package doc),
	// every restart waits a uniformly random time in [d/2, 3d/2], mean d,
	// as in DBx1000 (Yu et al.). Under NoWait and Timeout nothing but the
	// restart timing breaks a cycle of aborts, so the delay grows with the
	// transaction's aborts: exponential backoff with full jitter, the n-th
	// restart waiting a uniformly random time in
	// [0, min(MaxRestartDelay, 2d·2ⁿ⁻¹)] (mean d the first time). A
	// restarted transaction keeps its original timestamp.
	RestartDelay Time
	// MaxRestartDelay caps the growing backoff under NoWait and Timeout.
	// The default is 4 times the longest an attempt can last: the steps of
	// the longest script, each taking OpTime plus, under Timeout, up to
	// LockTimeout of waiting, and its think time (32.3ms under Timeout and
	// 320µs under NoWait for 8 steps and the other defaults); at least
	// 2·RestartDelay, the first restart's window. A cycle of aborts ends
	// once a transaction that keeps aborting can stay away for longer than
	// the others need to finish (see "Progress" in the package doc).
	MaxRestartDelay Time
	// Seed drives the restart jitter.
	Seed uint64
	// History keeps the reads and writes of the committed attempts in
	// Result.History, for Result.CheckSerializable (which refuses a run
	// without it: ErrNoHistory). It costs memory in proportion
	// to the committed steps, the size of the workload itself; the steps of
	// an attempt are dropped when it aborts. Without History (the default)
	// a run holds memory in proportion to its live transactions, however
	// many lock requests it makes.
	History bool
	// Trace records every scheduling event in Result.Trace. Its memory
	// grows with every lock request and abort: keep it for short runs.
	Trace bool
	// MaxGraphs is how many wait-for graphs to keep (at the moment of each
	// of the first deadlocks found); default 1, negative keeps none.
	MaxGraphs int
	// MaxEvents, when positive, stops a run after that many scheduler
	// events (an arrival, a step, a lock timeout or a periodic detection
	// each count one; a lock request is at most one) with an error wrapping
	// ErrLimit. Default 0: no limit. It bounds the CPU time of a run that
	// thrashes (see "Progress" in the package doc).
	MaxEvents int
	// MaxTime, when positive, stops a run whose logical clock passes it
	// with an error wrapping ErrLimit. Default 0: no limit.
	MaxTime Time
	// Check verifies the lock table after every event and, under WaitDie,
	// WoundWait and NoWait, that the wait-for graph has no cycle; a
	// violation ends the run with an error wrapping ErrInvariant. Slow;
	// for tests.
	Check bool
}

// HistoryOp is one read or write of a committed transaction.
type HistoryOp struct {
	Time     Time
	Txn      TxnID
	Kind     OpKind // Read or Write
	Resource Resource
}

// Result is the outcome of one simulation run.
type Result struct {
	Policy Policy
	Victim Victim
	// Committed is the number of committed transactions (all of them,
	// when Simulate returns no error).
	Committed int
	// Events is the number of scheduler events the run handled (see
	// Options.MaxEvents).
	Events int
	// Aborts counts aborted attempts by cause.
	Aborts Aborts
	// Deadlocks is the number of wait-for cycles found.
	Deadlocks int
	// LockRequests counts lock requests, including repeats after restarts.
	LockRequests int
	// Waits counts requests that had to wait.
	Waits int
	// MeanWait and P99Wait are over all lock requests (0 for one granted at
	// once; a wait ended by an abort counts until the abort). They come
	// from a streaming histogram: MeanWait is exact, P99Wait is the
	// nearest-rank 99th percentile, exact up to 2.047ms and at most 1/1024
	// high above.
	MeanWait, P99Wait Time
	// Elapsed is the logical time of the last commit.
	Elapsed Time
	// Throughput is committed transactions per logical second.
	Throughput float64
	// History lists the reads and writes of the committed attempts in
	// execution order, when Options.History is set (nil otherwise, and
	// non-nil, possibly empty, with it): a conflict-serializable history
	// if 2PL is correct (see Result.CheckSerializable).
	History []HistoryOp
	// Trace is the schedule, when Options.Trace is set.
	Trace []TraceEvent
	// Graphs holds the wait-for graph at each of the first
	// Options.MaxGraphs deadlocks, the cycle and the victim marked.
	Graphs []*WaitForGraph
}

type evKind uint8

const (
	evArrive evKind = iota
	evStep
	evTimeout
	evDetect
)

type event struct {
	at   Time
	seq  uint64
	kind evKind
	inc  uint32
	tx   int32
	aux  uint64
}

type simTxn struct {
	txn       *Txn
	ts        uint64 // admission order: the timestamp for wait-die/wound-wait/youngest
	pc        int
	inc       uint32 // bumped on abort so the attempt's pending events are ignored
	work      int
	waiting   bool
	waitSince Time
	waitSeq   uint64
	hist      []histRec // the current attempt's grants, with Options.History
}

// histRec is a grant kept for Result.History. Grants are buffered per
// attempt, so that an abort drops its own at once, and numbered, so that
// the committed ones can be put back in execution order at the end.
type histRec struct {
	HistoryOp
	seq uint64
}

type sim struct {
	o       Options
	lm      LockManager
	txns    []simTxn
	byID    map[TxnID]int32
	order   []int32 // arrival order
	next    int     // next arrival in order
	admit   []int32 // waiting for admission
	active  int
	ev      []event
	seq     uint64
	now     Time
	nextTS  uint64
	rng     *rand.Rand
	res     Result
	waits   histogram
	hist    []histRec   // grants of the committed attempts, with Options.History
	spare   [][]histRec // emptied per-attempt buffers, for reuse
	grantNo uint64
	grants  []Grant
	ids     []TxnID
	detect  bool // a periodic detection is scheduled
	backoff bool // restart delays grow with a transaction's aborts
	waitLog []event
	err     error
	// afterEvent, when set (by tests), runs after every event: a window on
	// what the simulator holds during a run.
	afterEvent func()
}

// Simulate runs the transaction scripts under strict two-phase locking on a
// discrete-event scheduler with a logical clock and returns what happened.
// The run is deterministic: the same txns and opts give the same Result.
// An aborted attempt releases its locks and restarts from its first step
// after a random delay (Options.RestartDelay).
//
// Under Detect, DetectPeriodic, WaitDie and WoundWait every transaction
// commits. Under NoWait and Timeout a run can go on for a long time
// without a commit (aborts that keep recreating the same conflicts), and
// ends only because restart delays grow and are random: with probability
// 1, but with no bound on the time or on the number of events; see
// "Progress" in the package doc. Options.MaxEvents and Options.MaxTime
// bound a run.
//
// It returns an error wrapping ErrInvalidWorkload, and a nil Result, for
// invalid options or scripts (zero or duplicate IDs, unknown step kinds,
// negative times). Once the run has started, it returns the Result so far
// (Committed < len(txns)) together with an error wrapping ErrLimit when
// Options.MaxEvents or Options.MaxTime stops it, ctx.Err() when ctx ends
// (checked every few thousand events), ErrStuck if transactions cannot
// finish (a bug), or ErrInvariant when Options.Check finds a broken
// invariant.
func Simulate(ctx context.Context, txns []Txn, opts *Options) (*Result, error) {
	s, err := newSim(txns, opts)
	if err != nil {
		return nil, err
	}
	return s.run(ctx)
}

// newSim validates the options and scripts and sets up a run.
func newSim(txns []Txn, opts *Options) (*sim, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Concurrency == 0 {
		o.Concurrency = 10
	}
	if o.OpTime == 0 {
		o.OpTime = 10 * Microsecond
	}
	if o.DetectInterval == 0 {
		o.DetectInterval = Millisecond
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = Millisecond
	}
	if o.RestartDelay == 0 {
		o.RestartDelay = 100 * Microsecond
	}
	if o.MaxGraphs == 0 {
		o.MaxGraphs = 1
	}
	if o.Concurrency < 0 || o.OpTime < 0 || o.DetectInterval < 0 || o.LockTimeout < 0 || o.RestartDelay < 0 ||
		o.MaxRestartDelay < 0 || o.MaxEvents < 0 || o.MaxTime < 0 {
		return nil, fmt.Errorf("%w: negative option", ErrInvalidWorkload)
	}
	if int(o.Policy) >= len(policyNames) || int(o.Victim) >= len(victimNames) {
		return nil, fmt.Errorf("%w: unknown policy %s or victim rule %s", ErrInvalidWorkload, o.Policy, o.Victim)
	}
	s := &sim{
		o:     o,
		txns:  make([]simTxn, len(txns)),
		byID:  make(map[TxnID]int32, len(txns)),
		order: make([]int32, len(txns)),
		rng:   rand.New(rand.NewPCG(o.Seed, 0x5eed)),
	}
	s.res.Policy, s.res.Victim = o.Policy, o.Victim
	s.backoff = o.Policy == NoWait || o.Policy == Timeout
	lockWait := Time(0) // the longest a lock request can wait in an attempt
	if o.Policy == Timeout {
		lockWait = o.LockTimeout
	}
	var longest Time // the longest an attempt can last
	for i := range txns {
		t := &txns[i]
		if t.ID == 0 || t.Arrival < 0 {
			return nil, fmt.Errorf("%w: transaction %d has ID 0 or a negative arrival", ErrInvalidWorkload, i)
		}
		if _, dup := s.byID[t.ID]; dup {
			return nil, fmt.Errorf("%w: duplicate transaction ID %d", ErrInvalidWorkload, t.ID)
		}
		var attempt Time
		for _, op := range t.Ops {
			if (op.Kind != Read && op.Kind != Write && op.Kind != Think) || op.Duration < 0 {
				return nil, fmt.Errorf("%w: transaction %d has an invalid step %+v", ErrInvalidWorkload, t.ID, op)
			}
			d := op.Duration
			if op.Kind != Think {
				d = satAdd(o.OpTime, lockWait)
			}
			attempt = satAdd(attempt, d)
		}
		longest = max(longest, attempt)
		s.byID[t.ID] = int32(i)
		s.txns[i].txn = t
		s.order[i] = int32(i)
	}
	if s.o.MaxRestartDelay == 0 {
		s.o.MaxRestartDelay = max(satMul(o.RestartDelay, 2), satMul(longest, 4))
	}
	slices.SortStableFunc(s.order, func(a, b int32) int {
		return cmpTime(txns[a].Arrival, txns[b].Arrival)
	})
	if len(s.order) > 0 {
		s.push(event{at: txns[s.order[0]].Arrival, kind: evArrive})
	}
	return s, nil
}

// run executes the events until every transaction has committed, a limit
// is reached or ctx ends.
func (s *sim) run(ctx context.Context) (*Result, error) {
	o := &s.o
	// Once every transaction has committed, what is left in the queue is
	// stale (timeouts and steps of aborted attempts, a periodic detection):
	// the run is over, whatever the limits.
	for ; len(s.ev) > 0 && s.err == nil && s.res.Committed < len(s.txns); s.res.Events++ {
		if s.res.Events%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return s.stop(fmt.Errorf("deadlock: simulation stopped at t=%s with %d of %d committed: %w", s.now, s.res.Committed, len(s.txns), err))
			}
		}
		if o.MaxEvents > 0 && s.res.Events >= o.MaxEvents {
			return s.stop(fmt.Errorf("%w: MaxEvents (%d) reached at t=%s with %d of %d transactions committed", ErrLimit, o.MaxEvents, s.now, s.res.Committed, len(s.txns)))
		}
		if o.MaxTime > 0 && s.ev[0].at > o.MaxTime {
			return s.stop(fmt.Errorf("%w: MaxTime (%s) reached with %d of %d transactions committed", ErrLimit, o.MaxTime, s.res.Committed, len(s.txns)))
		}
		e := s.pop()
		s.now = e.at
		s.handle(e)
		if o.Check && s.err == nil {
			s.check()
		}
		if s.afterEvent != nil {
			s.afterEvent()
		}
	}
	if s.err != nil {
		return s.stop(s.err)
	}
	if s.res.Committed != len(s.txns) {
		return s.stop(fmt.Errorf("%w: %d of %d transactions committed, nothing left to happen", ErrStuck, s.res.Committed, len(s.txns)))
	}
	s.finish()
	return &s.res, nil
}

// stop ends a run early: the statistics so far, and err.
func (s *sim) stop(err error) (*Result, error) {
	s.finish()
	return &s.res, err
}

func cmpTime(a, b Time) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// after returns the logical time d after now, saturating rather than
// wrapping around for absurdly long delays.
func (s *sim) after(d Time) Time { return satAdd(s.now, d) }

// satAdd returns a+b for non-negative times, saturating.
func satAdd(a, b Time) Time {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// satMul returns t·n for a non-negative t and a positive n, saturating.
func satMul(t Time, n int64) Time {
	if t > math.MaxInt64/Time(n) {
		return math.MaxInt64
	}
	return t * Time(n)
}

func (s *sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.ev = append(s.ev, e)
	h := s.ev
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !evLess(&h[i], &h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func evLess(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (s *sim) pop() event {
	h := s.ev
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && evLess(&h[r], &h[l]) {
			m = r
		}
		if !evLess(&h[m], &h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	s.ev = h
	return top
}

func (s *sim) trace(e TraceEvent) {
	if s.o.Trace {
		e.Time = s.now
		s.res.Trace = append(s.res.Trace, e)
	}
}

func (s *sim) handle(e event) {
	switch e.kind {
	case evArrive:
		i := s.order[s.next]
		s.next++
		if s.next < len(s.order) {
			s.push(event{at: s.txns[s.order[s.next]].txn.Arrival, kind: evArrive})
		}
		if s.active < s.o.Concurrency {
			s.start(i)
		} else {
			s.admit = append(s.admit, i)
		}
	case evStep:
		t := &s.txns[e.tx]
		if t.inc == e.inc && !t.waiting {
			s.step(e.tx)
		}
	case evTimeout:
		t := &s.txns[e.tx]
		if t.inc == e.inc && t.waiting && t.waitSeq == e.aux {
			s.abort(e.tx, CauseTimeout)
		}
	case evDetect:
		s.detectAll()
	}
}

func (s *sim) start(i int32) {
	t := &s.txns[i]
	s.nextTS++
	t.ts = s.nextTS
	s.active++
	s.trace(TraceEvent{Kind: TraceStart, Txn: t.txn.ID})
	s.step(i)
}

func (s *sim) step(i int32) {
	t := &s.txns[i]
	if t.pc == len(t.txn.Ops) {
		s.commit(i)
		return
	}
	op := t.txn.Ops[t.pc]
	if op.Kind == Think {
		t.pc++
		s.push(event{at: s.after(op.Duration), kind: evStep, tx: i, inc: t.inc})
		return
	}
	mode := Shared
	if op.Kind == Write {
		mode = Exclusive
	}
	s.res.LockRequests++
	if s.o.Policy == NoWait {
		ok, _ := s.lm.TryAcquire(t.txn.ID, op.Resource, mode)
		if ok {
			s.waits.record(0)
			s.granted(i, mode)
		} else {
			s.waits.record(0)
			s.abort(i, CauseNoWait)
		}
		return
	}
	st, err := s.lm.Acquire(t.txn.ID, op.Resource, mode)
	if err != nil {
		s.err = fmt.Errorf("%w: %v", ErrInvariant, err)
		return
	}
	if st == Granted {
		s.waits.record(0)
		s.granted(i, mode)
		return
	}
	s.wait(i, op.Resource, mode)
}

func (s *sim) granted(i int32, mode Mode) {
	t := &s.txns[i]
	op := t.txn.Ops[t.pc]
	if s.o.History {
		if t.hist == nil && len(s.spare) > 0 {
			t.hist = s.spare[len(s.spare)-1]
			s.spare = s.spare[:len(s.spare)-1]
		}
		s.grantNo++
		t.hist = append(t.hist, histRec{HistoryOp: HistoryOp{Time: s.now, Txn: t.txn.ID, Kind: op.Kind, Resource: op.Resource}, seq: s.grantNo})
	}
	s.trace(TraceEvent{Kind: TraceGrant, Txn: t.txn.ID, Resource: op.Resource, Mode: mode})
	t.pc++
	t.work++
	s.push(event{at: s.after(s.o.OpTime), kind: evStep, tx: i, inc: t.inc})
}

func (s *sim) blockers(i int32) []TxnID {
	t := s.lm.txns[s.txns[i].txn.ID]
	s.lm.buf = appendBlockers(t, s.lm.buf[:0])
	s.ids = s.ids[:0]
	for _, b := range s.lm.buf {
		s.ids = append(s.ids, b.id)
	}
	return s.ids
}

func (s *sim) wait(i int32, r Resource, mode Mode) {
	t := &s.txns[i]
	t.waiting = true
	t.waitSince = s.now
	t.waitSeq++
	s.res.Waits++
	if s.o.Trace {
		s.trace(TraceEvent{Kind: TraceWait, Txn: t.txn.ID, Resource: r, Mode: mode, Txns: slices.Clone(s.blockers(i))})
	}
	switch s.o.Policy {
	case Detect:
		s.resolve(i)
	case DetectPeriodic:
		s.waitLog = append(s.waitLog, event{tx: i, aux: t.waitSeq, inc: t.inc})
		if !s.detect {
			s.detect = true
			s.push(event{at: s.after(s.o.DetectInterval), kind: evDetect})
		}
	case Timeout:
		s.push(event{at: s.after(s.o.LockTimeout), kind: evTimeout, tx: i, inc: t.inc, aux: t.waitSeq})
	case WaitDie:
		// Older waits for younger; a younger requester dies.
		for _, b := range s.blockers(i) {
			if s.txns[s.byID[b]].ts < t.ts {
				s.abort(i, CauseDied)
				return
			}
		}
		// An upgrade queued ahead of waiters gave them a new edge into t.
		for _, w := range s.lm.waitersBehind(t.txn.ID, s.ids[:0]) {
			if wi := s.byID[w]; s.txns[wi].ts > t.ts && s.txns[wi].waiting {
				s.abort(wi, CauseDied)
			}
		}
	case WoundWait:
		// Older wounds younger holders; younger waits for older.
		victims := slices.Clone(s.blockers(i))
		for _, b := range victims {
			if bi := s.byID[b]; s.txns[bi].ts > t.ts {
				s.abort(bi, CauseWounded)
			}
		}
		if t.waiting {
			for _, w := range s.lm.waitersBehind(t.txn.ID, s.ids[:0]) {
				if s.txns[s.byID[w]].ts < t.ts {
					s.abort(i, CauseWounded)
					return
				}
			}
		}
	}
}

// resolve breaks every cycle through the waiting transaction i.
func (s *sim) resolve(i int32) {
	t := &s.txns[i]
	for t.waiting {
		cyc := s.lm.FindCycle(t.txn.ID)
		if cyc == nil {
			return
		}
		s.res.Deadlocks++
		v := s.victim(cyc)
		vid := s.txns[v].txn.ID
		if len(s.res.Graphs) < s.o.MaxGraphs {
			g := s.lm.Graph()
			g.Time, g.Cycle, g.Victim = s.now, slices.Clone(cyc), vid
			s.res.Graphs = append(s.res.Graphs, g)
		}
		if s.o.Trace {
			s.trace(TraceEvent{Kind: TraceDeadlock, Txn: vid, Txns: slices.Clone(cyc)})
		}
		s.abort(v, CauseDeadlock)
	}
}

func (s *sim) victim(cyc []TxnID) int32 {
	best := int32(-1)
	bestLocks := 0
	for _, id := range cyc {
		x := s.byID[id]
		locks := 0
		if s.o.Victim == FewestLocks {
			locks = s.lm.Held(id)
		}
		if best < 0 {
			best, bestLocks = x, locks
			continue
		}
		a, b := &s.txns[x], &s.txns[best]
		better := a.ts > b.ts
		switch s.o.Victim {
		case LeastWork:
			if a.work != b.work {
				better = a.work < b.work
			}
		case FewestLocks:
			if locks != bestLocks {
				better = locks < bestLocks
			}
		}
		if better {
			best, bestLocks = x, locks
		}
	}
	return best
}

func (s *sim) detectAll() {
	s.detect = false
	live := s.waitLog[:0]
	for _, w := range s.waitLog {
		t := &s.txns[w.tx]
		if t.waiting && t.inc == w.inc && t.waitSeq == w.aux {
			live = append(live, w)
		}
	}
	s.waitLog = live
	for _, w := range s.waitLog {
		if t := &s.txns[w.tx]; t.waiting && t.inc == w.inc && t.waitSeq == w.aux {
			s.resolve(w.tx)
		}
	}
	live = s.waitLog[:0]
	for _, w := range s.waitLog {
		if t := &s.txns[w.tx]; t.waiting && t.inc == w.inc && t.waitSeq == w.aux {
			live = append(live, w)
		}
	}
	s.waitLog = live
	if len(live) > 0 {
		s.detect = true
		s.push(event{at: s.after(s.o.DetectInterval), kind: evDetect})
	}
}

func (s *sim) abort(i int32, c Cause) {
	t := &s.txns[i]
	if t.waiting {
		t.waiting = false
		s.waits.record(s.now - t.waitSince)
	}
	s.grants = append(s.grants[:0], s.lm.release(t.txn.ID, nil)...)
	t.inc++
	t.pc, t.work = 0, 0
	t.hist = t.hist[:0] // the attempt's steps are not part of the history
	s.res.Aborts.add(c)
	s.trace(TraceEvent{Kind: TraceAbort, Txn: t.txn.ID, Cause: c})
	s.push(event{at: s.after(s.restartDelay(t.inc)), kind: evStep, tx: i, inc: t.inc})
	s.wake()
}

// restartDelay draws the delay before a transaction's n-th restart (n ≥ 1)
// from the run's seeded generator.
//
// Under the timestamp policies it is a fixed penalty with jitter, as in
// DBx1000 (Yu et al.). Under NoWait and Timeout that is not enough: a
// cycle of lock timeouts among a few transactions can repeat forever.
// After a timeout the survivors take the victim's locks and deadlock again
// among themselves within a step or two; the victim restarts in
// [d/2, 3d/2], always after that and always before the next timeout
// (LockTimeout later) fires on the survivor that waited first, so every
// draw leads to the same state and the jitter never matters. The window
// therefore doubles with each abort of the transaction (full jitter, as
// in package retry) up to MaxRestartDelay: a transaction that keeps
// aborting eventually stays away long enough for the others to finish.
func (s *sim) restartDelay(n uint32) Time {
	d := s.o.RestartDelay
	if !s.backoff {
		return satAdd(d/2, Time(s.rng.Uint64N(uint64(d)+1)))
	}
	w := satMul(d, 2)
	for k := uint32(1); k < n && w < s.o.MaxRestartDelay; k++ {
		w = satMul(w, 2)
	}
	return Time(s.rng.Uint64N(uint64(min(w, s.o.MaxRestartDelay)) + 1))
}

func (s *sim) commit(i int32) {
	t := &s.txns[i]
	s.grants = append(s.grants[:0], s.lm.release(t.txn.ID, nil)...)
	s.res.Committed++
	if t.hist != nil {
		s.hist = append(s.hist, t.hist...)
		s.spare = append(s.spare, t.hist[:0])
		t.hist = nil
	}
	s.res.Elapsed = s.now
	s.active--
	s.trace(TraceEvent{Kind: TraceCommit, Txn: t.txn.ID})
	s.wake()
	if len(s.admit) > 0 && s.active < s.o.Concurrency {
		n := s.admit[0]
		s.admit = s.admit[1:]
		s.start(n)
	}
}

// wake hands the grants of the last release to their waiting transactions.
func (s *sim) wake() {
	gs := s.grants
	s.grants = nil
	for _, g := range gs {
		i := s.byID[g.Txn]
		t := &s.txns[i]
		t.waiting = false
		s.waits.record(s.now - t.waitSince)
		s.granted(i, g.Mode)
	}
	s.grants = gs[:0]
}

func (s *sim) check() {
	if err := s.lm.Check(); err != nil {
		s.err = err
		return
	}
	switch s.o.Policy {
	case WaitDie, WoundWait, NoWait:
		for id, t := range s.lm.txns {
			if t.waitOn == nil {
				continue
			}
			if s.o.Policy == NoWait {
				s.err = fmt.Errorf("%w: T%d waits under no-wait", ErrInvariant, id)
				return
			}
			if c := s.lm.FindCycle(id); c != nil {
				s.err = fmt.Errorf("%w: deadlock %v under %s", ErrInvariant, c, s.o.Policy)
				return
			}
		}
	}
}

func (s *sim) finish() {
	r := &s.res
	r.MeanWait = s.waits.mean()
	r.P99Wait = s.waits.quantile(99, 100)
	if r.Elapsed > 0 {
		r.Throughput = float64(r.Committed) / (float64(r.Elapsed) / float64(Second))
	}
	if s.o.History {
		// Each attempt's grants are in order; merge the attempts.
		slices.SortFunc(s.hist, func(a, b histRec) int { return cmp.Compare(a.seq, b.seq) })
		r.History = make([]HistoryOp, len(s.hist))
		for i, h := range s.hist {
			r.History[i] = h.HistoryOp
		}
		s.hist = nil
	}
}
