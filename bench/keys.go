package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// MaxKeys bounds the key space of a cell (hot rows or Zipfian keys): every
// key is a row the benchmark inserts before the cell and checks after it.
const MaxKeys = 1_000_000

// chooser picks row keys, 1..n.
type chooser interface {
	// next returns a key in [1, n].
	next(r *rand.Rand) int64
	// n is the size of the key space.
	n() int64
}

// uniform picks one of n hot rows with equal probability.
type uniform struct{ rows int64 }

func (u uniform) next(r *rand.Rand) int64 { return r.Int64N(u.rows) + 1 }
func (u uniform) n() int64                { return u.rows }

// zipfian is YCSB's ZipfianGenerator (Gray, Sundaresan, Englert, Baclawski and
// Weinberger, "Quickly Generating Billion-Record Synthetic Databases",
// SIGMOD 1994): item i (0-based) has probability (1/(i+1)^θ)/ζ(n, θ).
// Gray et al.'s closed-form inversion is exact for the first two items and
// an approximation for the others (at θ 0.9-0.99 it draws the third item
// about 16% too often, as YCSB does; the share of the hottest 10% of keys is
// within 3 points); it needs θ < 1 (its exponent 1/(1-θ)
// is infinite at θ = 1). For θ ≥ 1 (YCSB never goes there; this benchmark
// does, e.g. 1.2) the generator inverts the exact cumulative distribution
// with a binary search over a precomputed table instead. θ = 0 is uniform.
// Key 1 is the hottest.
type zipfian struct {
	items int64
	theta float64
	// Gray et al. (θ < 1)
	zetan, alpha, eta, half float64
	// exact inversion (θ ≥ 1)
	cdf []float64
}

// zeta returns ζ(n, θ) = Σ_{i=1..n} 1/i^θ.
func zeta(n int64, theta float64) float64 {
	var s float64
	for i := int64(1); i <= n; i++ {
		s += 1 / math.Pow(float64(i), theta)
	}
	return s
}

func newZipfian(items int64, theta float64) (*zipfian, error) {
	if items < 1 || items > MaxKeys {
		return nil, fmt.Errorf("bench: zipfian key space %d outside [1, %d]", items, MaxKeys)
	}
	if theta < 0 || math.IsNaN(theta) || math.IsInf(theta, 0) || theta > 10 {
		return nil, fmt.Errorf("bench: zipfian θ %v outside [0, 10]", theta)
	}
	z := &zipfian{items: items, theta: theta}
	if theta >= 1 {
		z.cdf = make([]float64, items)
		var s float64
		for i := range items {
			s += 1 / math.Pow(float64(i+1), theta)
			z.cdf[i] = s
		}
		for i := range z.cdf {
			z.cdf[i] /= s
		}
		return z, nil
	}
	z.zetan = zeta(items, theta)
	zeta2 := zeta(2, theta)
	z.alpha = 1 / (1 - theta)
	z.eta = (1 - math.Pow(2/float64(items), 1-theta)) / (1 - zeta2/z.zetan)
	z.half = math.Pow(0.5, theta)
	return z, nil
}

func (z *zipfian) n() int64 { return z.items }

func (z *zipfian) next(r *rand.Rand) int64 {
	u := r.Float64()
	if z.cdf != nil {
		i := sort.SearchFloat64s(z.cdf, u)
		if i >= len(z.cdf) {
			i = len(z.cdf) - 1
		}
		return int64(i) + 1
	}
	uz := u * z.zetan
	if uz < 1 {
		return 1
	}
	if uz < 1+z.half {
		return 2
	}
	i := int64(float64(z.items) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if i >= z.items {
		i = z.items - 1
	}
	if i < 0 {
		i = 0
	}
	return i + 1
}

// probability returns the exact probability of key k (1-based) under
// Zipf(n, θ); it is used by the tests.
func (z *zipfian) probability(k int64) float64 {
	if z.cdf != nil {
		if k == 1 {
			return z.cdf[0]
		}
		return z.cdf[k-1] - z.cdf[k-2]
	}
	return 1 / math.Pow(float64(k), z.theta) / z.zetan
}

// pair returns two distinct keys for a transfer, in the order drawn (not
// sorted: the order is what makes the workload deadlock-prone). With a
// single-key space it returns the same key twice; callers never ask.
func pair(c chooser, r *rand.Rand) (int64, int64) {
	a := c.next(r)
	for range 64 {
		if b := c.next(r); b != a {
			return a, b
		}
	}
	// A very skewed distribution keeps drawing the same hot key: take its
	// neighbour rather than spin.
	b := a%c.n() + 1
	return a, b
}
