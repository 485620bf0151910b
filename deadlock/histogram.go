package deadlock

import "math/bits"

// histExact is where the histogram stops counting values one by one: below
// 2^histExact (2,048 logical µs) every value has its own bucket; above, each
// power of two is split into histHalf buckets, so a bucket is at most 1/1024
// as wide as its values (HdrHistogram's layout for three significant
// digits). Waits under the default lock timeout and detection period are
// therefore counted exactly.
const (
	histExact = 11
	histHalf  = 1 << (histExact - 1)
)

// histogram streams lock waits: their count, their mean (summed in the
// order recorded, as a float64, like a plain average) and their
// distribution in log-linear buckets. Its size depends on the largest value
// recorded (at most 55,296 buckets, for math.MaxInt64), never on how many
// values were recorded: a run that makes millions of lock requests needs no
// more than a short one. The zero value is empty and ready to use.
//
// It is not hdrhistogram-go's Histogram: that one allocates its whole value
// range up front (hundreds of KiB per run for int64 waits, or a clamp), and
// this one keeps the package standard-library only and the nearest-rank
// percentile P99Wait has always reported.
type histogram struct {
	counts []uint64 // grown up to the bucket of the largest value
	tops   []Time   // the largest value seen in each inexact bucket
	n      uint64
	sum    float64
	max    Time
}

// histBucket returns v's bucket: v itself below 2^histExact, then
// histHalf buckets per power of two.
func histBucket(v Time) int {
	u := uint64(v)
	if u < 1<<histExact {
		return int(u)
	}
	shift := bits.Len64(u) - histExact // >= 1
	return 1<<histExact + (shift-1)*histHalf + int(u>>shift) - histHalf
}

// record adds one value; a negative one counts as 0.
func (h *histogram) record(v Time) {
	v = max(v, 0)
	i := histBucket(v)
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, i+1-len(h.counts))...)
	}
	h.counts[i]++
	if i >= 1<<histExact {
		j := i - 1<<histExact
		if j >= len(h.tops) {
			h.tops = append(h.tops, make([]Time, j+1-len(h.tops))...)
		}
		h.tops[j] = max(h.tops[j], v)
	}
	h.n++
	h.sum += float64(v)
	h.max = max(h.max, v)
}

// mean returns the mean rounded to the nearest Time, 0 when empty.
func (h *histogram) mean() Time {
	if h.n == 0 {
		return 0
	}
	return Time(h.sum/float64(h.n) + 0.5)
}

// quantile returns the nearest-rank quantile num/den (0 < num <= den): the
// smallest recorded value v such that at least ⌈n·num/den⌉ values are <= v.
// It is exact below 2^histExact; above, it is the largest value recorded
// in v's bucket: exact when the bucket saw one distinct value, else at most
// 1/1024 over v. It returns 0 when empty.
func (h *histogram) quantile(num, den uint64) Time {
	if h.n == 0 || den == 0 {
		return 0
	}
	// k = ⌈n·num/den⌉ in 128 bits: exact for any count.
	hi, lo := bits.Mul64(h.n, min(num, den))
	lo, carry := bits.Add64(lo, den-1, 0)
	k, _ := bits.Div64(hi+carry, lo, den)
	k = max(k, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= k {
			if i < 1<<histExact {
				return Time(i)
			}
			return h.tops[i-1<<histExact]
		}
	}
	return h.max
}
