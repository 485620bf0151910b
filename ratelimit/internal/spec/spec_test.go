package spec

import (
	"maps"
	"testing"
	"time"

	"github.com/concurkit/concurkit/ratelimit"
)

func (m *Model) clone() *Model {
	return &Model{windows: maps.Clone(m.windows), tats: maps.Clone(m.tats)}
}

var start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// FuzzModel drives the reference model with arbitrary calls and checks
// the promises of the package doc on every decision:
//   - a fixed window never admits more than Rate in one window; GCRA never
//     admits more than Burst + elapsed/T over any interval;
//   - Remaining is exact: exactly that many more calls of cost 1 pass at
//     the same instant;
//   - RetryAfter is exact: the refused call passes RetryAfter later, not
//     one microsecond sooner.
func FuzzModel(f *testing.F) {
	f.Add(byte(0), uint8(5), uint16(1000), []byte{1, 0, 1, 9, 2, 200, 1, 1, 1, 3})
	f.Add(byte(1), uint8(3), uint16(250), []byte{3, 0, 3, 0, 1, 255, 2, 10, 1, 0})
	f.Add(byte(1), uint8(7), uint16(1500), []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, algo byte, rate uint8, periodMs uint16, ops []byte) {
		a := ratelimit.Algorithm(algo % 2)
		if rate == 0 || periodMs == 0 {
			return
		}
		limit := ratelimit.Limit{Rate: int64(rate), Period: time.Duration(periodMs)*time.Millisecond + 7*time.Microsecond}
		if a == ratelimit.GCRA {
			limit.Burst = int64(rate)/2 + 1
		}
		var m Model
		now := start
		type admitted struct{ at, n int64 }
		var log []admitted
		perWindow := map[int64]int64{}
		for i := 0; i+1 < len(ops); i += 2 {
			now = now.Add(time.Duration(ops[i]) * limit.Period / 64)
			c, err := Prepare("fuzz", a, "k", limit, 1, now)
			if err != nil {
				t.Fatal(err)
			}
			if n := 1 + int64(ops[i+1])%c.Capacity; n != 1 {
				c, _ = Prepare("fuzz", a, "k", limit, n, now)
			}
			before := m.clone()
			d := m.Decide("k", c)
			switch {
			case d.Allowed && (d.RetryAfter != 0 || d.Remaining < 0 || d.Remaining > c.Capacity-c.N):
				t.Fatalf("allowed with %+v", d)
			case !d.Allowed && (d.RetryAfter <= 0 || d.Remaining != 0):
				t.Fatalf("denied with %+v", d)
			}
			if d.Allowed {
				log = append(log, admitted{c.Now, c.N})
				if a == ratelimit.FixedWindow {
					perWindow[c.WindowEnd] += c.N
					if perWindow[c.WindowEnd] > limit.Rate {
						t.Fatalf("window ending %d admitted %d > %d", c.WindowEnd, perWindow[c.WindowEnd], limit.Rate)
					}
				}
				// Exactly Remaining more calls of cost 1 pass now.
				probe := m.clone()
				one, _ := Prepare("fuzz", a, "k", limit, 1, now)
				for j := range d.Remaining + 1 {
					if got := probe.Decide("k", one).Allowed; got != (j < d.Remaining) {
						t.Fatalf("Remaining %d, but call %d after it: allowed %v", d.Remaining, j+1, got)
					}
				}
				continue
			}
			// The refused call passes exactly RetryAfter later.
			for _, tc := range []struct {
				after time.Duration
				want  bool
			}{{d.RetryAfter - time.Microsecond, false}, {d.RetryAfter, true}} {
				c2, _ := Prepare("fuzz", a, "k", limit, c.N, now.Add(tc.after))
				if got := before.clone().Decide("k", c2).Allowed; got != tc.want {
					t.Fatalf("denied with RetryAfter %v; %v later: allowed %v", d.RetryAfter, tc.after, got)
				}
			}
		}
		if a == ratelimit.GCRA {
			c, _ := Prepare("fuzz", a, "k", limit, 1, now)
			for i := range log {
				var sum int64
				for j := i; j < len(log); j++ {
					sum += log[j].n
					if bound := c.Limit.Burst + (log[j].at-log[i].at)/c.Emission; sum > bound {
						t.Fatalf("GCRA admitted %d in %d µs, more than burst %d + elapsed/T", sum, log[j].at-log[i].at, c.Limit.Burst)
					}
				}
			}
		}
	})
}

func TestPrepareUnits(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 59, 999_999_999, time.UTC) // rounds down to the µs
	c, err := Prepare("t", ratelimit.FixedWindow, "k", ratelimit.Limit{Rate: 3, Period: time.Minute}, 2, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC).UnixMicro(); c.WindowEnd != want || c.Capacity != 3 {
		t.Fatalf("window end %d, capacity %d", c.WindowEnd, c.Capacity)
	}
	if ttl := c.WindowTTL(); ttl != 1+60_000+1000 {
		t.Fatalf("window TTL %d ms", ttl)
	}
	c, err = Prepare("t", ratelimit.GCRA, "k", ratelimit.Limit{Rate: 3, Period: time.Second, Burst: 4}, 2, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.Emission != 333_334 || c.Inc != 666_668 || c.Tau != 4*333_334 || c.Capacity != 4 || c.Limit.Burst != 4 {
		t.Fatalf("%+v", c)
	}
}
