package spec

import (
	"math"
	"testing"

	"github.com/concurkit/concurkit/inbox"
)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		last, seq int64
		policy    inbox.GapPolicy
		applied   bool
		gap       [2]int64
	}{
		{0, 1, inbox.RefuseGaps, true, [2]int64{}},
		{5, 5, inbox.RefuseGaps, false, [2]int64{}},
		{5, 1, inbox.ApplyGaps, false, [2]int64{}},
		{5, 6, inbox.ApplyGaps, true, [2]int64{}},
		{5, 7, inbox.RefuseGaps, false, [2]int64{6, 6}},
		{5, 9, inbox.ApplyGaps, true, [2]int64{6, 8}},
		{0, math.MaxInt64, inbox.RefuseGaps, false, [2]int64{1, math.MaxInt64 - 1}},
		{math.MaxInt64, math.MaxInt64, inbox.ApplyGaps, false, [2]int64{}}, // no overflow
		{math.MaxInt64 - 1, math.MaxInt64, inbox.RefuseGaps, true, [2]int64{}},
	} {
		r := Decide("c", "p", tc.last, tc.seq, tc.policy)
		var gap [2]int64
		if r.Gap != nil {
			gap = [2]int64{r.Gap.From, r.Gap.To}
		}
		if r.Applied != tc.applied || r.Last != tc.last || gap != tc.gap {
			t.Errorf("Decide(last %d, seq %d, %v) = %+v, want applied %v gap %v", tc.last, tc.seq, tc.policy, r, tc.applied, tc.gap)
		}
	}
}
