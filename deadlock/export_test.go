package deadlock

import "context"

// Footprint is the most a run held at any moment, for the memory tests:
// what must depend on the live transactions only, never on the number of
// lock requests.
type Footprint struct {
	// Records is the most history grants held at once, committed and
	// pending (the simulator keeps no per-wait record at all).
	Records int
	// Pending is the most grants of uncommitted attempts held at once (only
	// with Options.History).
	Pending int
	// PendingOverLive counts the events after which the pending grants
	// outnumbered the steps of the live transactions (a bug if positive).
	PendingOverLive int
	// Live is the most transactions active at once.
	Live int
	// Events is the longest the event queue got.
	Events int
	// Spare is the most emptied history buffers kept for reuse.
	Spare int
	// Buckets is the size of the wait histogram at the end.
	Buckets int
	// Committed is the number of committed grants kept for the history.
	Committed int
}

// SimulateFootprint runs Simulate and reports its Footprint, looking at the
// simulator's state after every event.
func SimulateFootprint(ctx context.Context, txns []Txn, opts *Options) (*Result, Footprint, error) {
	s, err := newSim(txns, opts)
	if err != nil {
		return nil, Footprint{}, err
	}
	longest := 0
	for _, t := range txns {
		longest = max(longest, len(t.Ops))
	}
	var f Footprint
	// Counting the pending grants walks every transaction: do it every
	// 16th event (16 events add at most 16 grants, so no growth hides
	// between two looks).
	count := func() {
		pending := 0
		for i := range s.txns {
			pending += len(s.txns[i].hist)
		}
		if pending > s.active*longest {
			f.PendingOverLive++
		}
		f.Pending = max(f.Pending, pending)
		f.Records = max(f.Records, pending+len(s.hist))
	}
	n := 0
	s.afterEvent = func() {
		if n++; n%16 == 0 {
			count()
		}
		f.Records = max(f.Records, len(s.hist))
		f.Live = max(f.Live, s.active)
		f.Events = max(f.Events, len(s.ev))
		f.Spare = max(f.Spare, len(s.spare))
		f.Committed = len(s.hist)
		f.Buckets = len(s.waits.counts) + len(s.waits.tops)
	}
	res, err := s.run(ctx)
	return res, f, err
}
