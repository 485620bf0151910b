package inbox_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/inbox"
)

// TestGaleraConcurrentDeliveries forces the cross-node race of
// TestConcurrentDuplicatesWait: one delivery of a message per node of the
// Galera cluster, each in its handler at the same time — on Galera no
// delivery waits on the key held on another node — then all released.
// The first to commit wins; the others lose at COMMIT (1213, or aborted
// by the winner's applier), which is a definite failure: their
// transactions are run again and find the id. Exactly one delivery
// reports processed, the effect is applied once, and the cluster counted
// the losers. The HandleSequence case: every node applies sequence 1 of a
// producer at once; exactly one applies it.
func TestGaleraConcurrentDeliveries(t *testing.T) {
	e := openGalera(t)
	c := e.galera
	ctx := t.Context()
	const messages = 5
	for _, seq := range []bool{false, true} {
		name := map[bool]string{false: "Handle", true: "HandleSequence"}[seq]
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			conflicts := c.Counted(t, name, func() {
				for m := range messages {
					id := ids("hot", messages)[m]
					inside := sync.WaitGroup{}
					inside.Add(len(c.Nodes))
					release := make(chan struct{})
					var processed, runs atomic.Int64
					var wg sync.WaitGroup
					errs := make(chan error, len(c.Nodes))
					for _, node := range c.Nodes {
						cons := myConsumer(t, node, &inbox.Config{Gaps: inbox.RefuseGaps})
						first := true
						hook := func() error {
							runs.Add(1)
							if first { // the first attempt waits for the others'
								first = false
								inside.Done()
								<-release
							}
							return nil
						}
						wg.Go(func() {
							var ok bool
							var err error
							if seq {
								var res inbox.SeqResult
								res, err = cons.handleSeq(ctx, "billing", id, 1, hook)
								ok = res.Applied
								if err == nil && !ok && !res.Duplicate() {
									err = errors.New("neither applied nor a duplicate")
								}
							} else {
								ok, err = cons.handle(ctx, "billing", id, hook)
							}
							if err != nil {
								errs <- err
							}
							if ok {
								processed.Add(1)
							}
						})
					}
					inside.Wait()
					close(release)
					wg.Wait()
					close(errs)
					for err := range errs {
						t.Errorf("%s: delivery: %v", id, err)
					}
					if processed.Load() != 1 {
						t.Errorf("%s: %d deliveries processed it, want 1 (handler run %d times)", id, processed.Load(), runs.Load())
					}
				}
			})
			if seq {
				for _, id := range ids("hot", messages) {
					if got := e.seqLog(t, id); !equal(got, []int64{1}) {
						t.Errorf("producer %s: applied %v, want [1]", id, got)
					}
				}
			} else {
				effects := e.effects(t)
				for _, id := range ids("hot", messages) {
					if effects[id] != 1 {
						t.Errorf("%s: effect applied %d times, want 1", id, effects[id])
					}
				}
			}
			if conflicts == 0 {
				t.Error("no certification failure or abort: the deliveries did not race across nodes")
			}
			t.Logf("%d messages, each delivered on %d nodes at once, in %v", messages, len(c.Nodes), time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestGaleraSequenceAcrossNodes: one producer's messages 1…150, each
// handled as soon as the one before returned, on the next node in turn.
// Each must be applied — not refused as a gap because its node has not
// yet applied its predecessor, committed a moment ago on another node —
// and redeliveries afterwards must be duplicates.
func TestGaleraSequenceAcrossNodes(t *testing.T) {
	e := openGalera(t)
	c := e.galera
	ctx := t.Context()
	const messages = 150
	var consumers []consumer
	for _, node := range c.Nodes {
		consumers = append(consumers, myConsumer(t, node, nil))
	}
	c.Counted(t, "sequence across nodes", func() {
		for seq := int64(1); seq <= messages; seq++ {
			n := len(consumers)
			res, err := consumers[int(seq)%n].handleSeq(ctx, "billing", "p", seq, nil)
			if err != nil || !res.Applied || res.Last != seq-1 {
				t.Fatalf("sequence %d: %+v (gap %v), %v; want applied after %d", seq, res, res.Gap, err, seq-1)
			}
		}
		for seq := int64(1); seq <= messages; seq += 10 {
			res, err := consumers[int(seq)%len(consumers)].handleSeq(ctx, "billing", "p", seq, nil)
			if err != nil || !res.Duplicate() || res.Last != messages {
				t.Fatalf("redelivery of sequence %d: %+v, %v; want a duplicate", seq, res, err)
			}
		}
	})
	want := make([]int64, messages)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if got := e.seqLog(t, "p"); !equal(got, want) {
		t.Errorf("applied %v, want 1…%d", got, messages)
	}
}
