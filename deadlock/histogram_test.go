package deadlock

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHistogramAgainstSort compares the streaming statistics with the
// exact ones of the recorded values, sorted: the mean always, the
// nearest-rank quantiles exactly below 2^histExact and within 1/1024
// above, over small and huge values.
func TestHistogramAgainstSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gens := map[string]func() Time{
		"small":     func() Time { return Time(rng.IntN(1 << histExact)) },
		"timeouts":  func() Time { return Time(rng.IntN(3)) * 500 },
		"wide":      func() Time { return Time(rng.ExpFloat64() * 5000) },
		"huge":      func() Time { return Time(rng.Int64N(math.MaxInt64)) },
		"powers":    func() Time { return Time(1) << rng.IntN(63) },
		"powers-1":  func() Time { return Time(1)<<(1+rng.IntN(62)) - 1 },
		"one value": func() Time { return 123456789 },
	}
	for name, gen := range gens {
		for _, n := range []int{1, 2, 99, 100, 101, 1000, 12345} {
			var h histogram
			vals := make([]Time, n)
			var sum float64
			for i := range vals {
				vals[i] = gen()
				sum += float64(vals[i])
				h.record(vals[i])
			}
			slices.Sort(vals)
			if got, want := h.mean(), Time(sum/float64(n)+0.5); got != want {
				t.Errorf("%s n=%d: mean %d, want %d", name, n, got, want)
			}
			for _, q := range [][2]uint64{{1, 100}, {50, 100}, {99, 100}, {999, 1000}, {1, 1}} {
				k := (uint64(n)*q[0] + q[1] - 1) / q[1] // nearest rank ⌈n·q⌉
				want := vals[max(k, 1)-1]
				got := h.quantile(q[0], q[1])
				if got < want || got-want > want/1024 || (want < 1<<histExact && got != want) {
					t.Errorf("%s n=%d: quantile %d/%d = %d, want %d", name, n, q[0], q[1], got, want)
				}
			}
		}
	}
}

func TestHistogramEdges(t *testing.T) {
	var h histogram
	if h.mean() != 0 || h.quantile(99, 100) != 0 {
		t.Fatal("empty histogram is not zero")
	}
	h.record(-5) // counts as 0
	h.record(math.MaxInt64)
	if got := h.quantile(1, 2); got != 0 {
		t.Errorf("median of {0, max} = %d", got)
	}
	if got := h.quantile(1, 1); got != math.MaxInt64 {
		t.Errorf("max = %d", got)
	}
	// The size is bounded by the value range, not the number of values.
	if n := histBucket(math.MaxInt64) + 1; n != len(h.counts) || n > 1<<histExact+52*histHalf {
		t.Errorf("%d buckets for MaxInt64, counts %d", n, len(h.counts))
	}
	// Buckets are contiguous and ordered.
	prev := -1
	for _, v := range []Time{0, 1, 2047, 2048, 2049, 4095, 4096, 1 << 40, math.MaxInt64} {
		b := histBucket(v)
		if b < prev {
			t.Errorf("bucket(%d) = %d < %d", v, b, prev)
		}
		prev = b
	}
	if histBucket(2047)+1 != histBucket(2048) || histBucket(4095)+1 != histBucket(4096) {
		t.Error("buckets not contiguous at powers of two")
	}
}
