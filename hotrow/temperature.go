package hotrow

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"time"
)

// temperature is a decaying per-key conflict count in bounded memory: a
// count-min sketch of depth rows of width counters (conservative update:
// a conflict raises only the counters at the key's minimum, which keeps
// the overestimate of a cold key that shares counters with hot ones
// small). Every halfLife every counter halves, lazily: the first call
// after an interval boundary shifts them all, so a key nobody touches
// costs nothing and nothing runs in the background.
//
// A key's estimate is never below its true decayed count; it is above
// only when each of its depth counters is shared with a hotter key, which
// for n keys with conflicts has probability about (n/width)^depth.
type temperature struct {
	mu       sync.Mutex
	seed     maphash.Seed
	mask     uint64
	cells    [depth][]uint32
	halfLife time.Duration
	start    time.Time
	epoch    int64 // half-lives from start already applied
	now      func() time.Time
}

const depth = 4

func newTemperature(width int, halfLife time.Duration, now func() time.Time) *temperature {
	w := 1 << bits.Len(uint(width-1)) // power of two ≥ width
	t := &temperature{
		seed: maphash.MakeSeed(), mask: uint64(w - 1),
		halfLife: halfLife, now: now, start: now(),
	}
	for i := range t.cells {
		t.cells[i] = make([]uint32, w)
	}
	return t
}

// index returns the key's counter in row i: double hashing from one
// 64-bit hash (the odd step visits distinct counters across rows).
func (t *temperature) index(h uint64, i int) uint64 {
	return (h + uint64(i)*(h>>32|1)) & t.mask
}

// decay halves every counter once per half-life passed since the last
// call. The caller holds mu.
func (t *temperature) decay() {
	e := int64(t.now().Sub(t.start) / t.halfLife)
	if e <= t.epoch {
		return
	}
	shift := min(e-t.epoch, 32)
	t.epoch = e
	for i := range t.cells {
		row := t.cells[i]
		for j := range row {
			row[j] = uint32(uint64(row[j]) >> shift)
		}
	}
}

// of returns the estimate for the key's hash; the caller holds mu.
func (t *temperature) of(h uint64) uint32 {
	m := ^uint32(0)
	for i := range t.cells {
		m = min(m, t.cells[i][t.index(h, i)])
	}
	return m
}

// heat counts one conflict of the key with hash h.
func (t *temperature) heat(h uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.decay()
	m := t.of(h)
	if m == ^uint32(0) {
		return
	}
	for i := range t.cells {
		if c := &t.cells[i][t.index(h, i)]; *c == m {
			*c = m + 1
		}
	}
}

// get returns the decayed estimate of the key with hash h.
func (t *temperature) get(h uint64) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.decay()
	return t.of(h)
}

// hash returns the sketch's hash of key.
func hash[K comparable](t *temperature, key K) uint64 { return maphash.Comparable(t.seed, key) }
