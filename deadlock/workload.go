package deadlock

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// OpKind is the kind of a transaction step.
type OpKind uint8

// Step kinds.
const (
	Read  OpKind = iota + 1 // take an S lock on Resource
	Write                   // take an X lock on Resource (upgrading an S lock)
	Think                   // spend Duration without locking anything
)

// String returns "read", "write" or "think".
func (k OpKind) String() string {
	switch k {
	case Read:
		return "read"
	case Write:
		return "write"
	case Think:
		return "think"
	default:
		return fmt.Sprintf("OpKind(%d)", uint8(k))
	}
}

// Op is one step of a transaction script.
type Op struct {
	Kind     OpKind
	Resource Resource // for Read and Write
	Duration Time     // for Think
}

// Txn is a transaction script: the steps it runs, in order, then commit.
type Txn struct {
	ID      TxnID // unique, non-zero
	Arrival Time  // when it is submitted
	Ops     []Op
}

// Workload describes a family of random transaction scripts. Generate turns
// it into the same scripts for the same Seed, so a run can be replayed
// exactly. The zero value is a valid workload: 1,000 transactions of 8
// writes each over 1,000 uniformly chosen resources, all arriving at time 0.
type Workload struct {
	// Seed selects the random scripts (0 is a valid seed).
	Seed uint64
	// Transactions is the number of scripts; default 1,000.
	Transactions int
	// Resources is the number of lockable items, numbered 0..Resources-1;
	// default 1,000.
	Resources int
	// Length is the number of reads and writes per transaction; default 8.
	// A transaction may touch a resource twice (a read then a write is an
	// S→X upgrade).
	Length int
	// ReadRatio is the probability that a step is a read (S lock) rather
	// than a write (X lock); 0, the default, makes every step a write.
	ReadRatio float64
	// Skew is the Zipf exponent θ of resource popularity (resource 0 the
	// most popular): 0, the default, is uniform; YCSB's "hot" is 0.99.
	Skew float64
	// HotResources, when positive, replaces Skew by a hot spot: a step
	// picks one of resources 0..HotResources-1 with probability
	// HotFraction and one of the others otherwise.
	HotResources int
	// HotFraction is the probability of a hot access; default 0.8 when
	// HotResources is set.
	HotFraction float64
	// ArrivalRate is the mean number of transactions submitted per logical
	// second (Poisson arrivals); 0, the default, submits them all at time 0
	// and lets the simulator's concurrency limit admit them.
	ArrivalRate float64
	// ThinkTime is inserted between consecutive steps; default 0.
	ThinkTime Time
}

// Generate returns the transaction scripts, with IDs 1..Transactions in
// arrival order. It returns an error wrapping ErrInvalidWorkload for
// negative counts or times, ratios outside [0,1] or HotResources >
// Resources.
func (w Workload) Generate() ([]Txn, error) {
	if w.Transactions == 0 {
		w.Transactions = 1000
	}
	if w.Resources == 0 {
		w.Resources = 1000
	}
	if w.Length == 0 {
		w.Length = 8
	}
	if w.HotResources > 0 && w.HotFraction == 0 {
		w.HotFraction = 0.8
	}
	switch {
	case w.Transactions < 0, w.Resources < 0, w.Length < 0, w.HotResources < 0, w.ThinkTime < 0:
		return nil, fmt.Errorf("%w: negative count or time", ErrInvalidWorkload)
	case !(w.ReadRatio >= 0 && w.ReadRatio <= 1), !(w.HotFraction >= 0 && w.HotFraction <= 1):
		return nil, fmt.Errorf("%w: ratio outside [0,1]", ErrInvalidWorkload)
	case !(w.Skew >= 0) || math.IsInf(w.Skew, 0), !(w.ArrivalRate >= 0) || math.IsInf(w.ArrivalRate, 0):
		return nil, fmt.Errorf("%w: skew and arrival rate must be finite and >= 0", ErrInvalidWorkload)
	case w.HotResources > w.Resources:
		return nil, fmt.Errorf("%w: %d hot resources of %d", ErrInvalidWorkload, w.HotResources, w.Resources)
	}
	rng := rand.New(rand.NewPCG(w.Seed, 0x9e3779b97f4a7c15))
	pick := w.picker(rng)
	step := 1
	if w.ThinkTime > 0 {
		step = 2
	}
	txns := make([]Txn, w.Transactions)
	ops := make([]Op, w.Transactions*(w.Length*step))
	var at float64
	for i := range txns {
		if w.ArrivalRate > 0 && i > 0 {
			at += rng.ExpFloat64() / w.ArrivalRate * float64(Second)
		}
		t := &txns[i]
		t.ID = TxnID(i + 1)
		t.Arrival = Time(at)
		t.Ops = ops[: 0 : w.Length*step]
		ops = ops[w.Length*step:]
		for j := 0; j < w.Length; j++ {
			if j > 0 && w.ThinkTime > 0 {
				t.Ops = append(t.Ops, Op{Kind: Think, Duration: w.ThinkTime})
			}
			k := Write
			if rng.Float64() < w.ReadRatio {
				k = Read
			}
			t.Ops = append(t.Ops, Op{Kind: k, Resource: pick()})
		}
	}
	return txns, nil
}

func (w Workload) picker(rng *rand.Rand) func() Resource {
	n := w.Resources
	switch {
	case w.HotResources > 0:
		hot := w.HotResources
		return func() Resource {
			if hot == n || rng.Float64() < w.HotFraction {
				return Resource(rng.IntN(hot))
			}
			return Resource(hot + rng.IntN(n-hot))
		}
	case w.Skew > 0:
		// Exact Zipf by inverse CDF: cdf[k] = Σ_{i<=k} 1/(i+1)^θ.
		cdf := make([]float64, n)
		var sum float64
		for k := range cdf {
			sum += math.Pow(float64(k+1), -w.Skew)
			cdf[k] = sum
		}
		return func() Resource {
			u := rng.Float64() * sum
			return Resource(sort.SearchFloat64s(cdf, u))
		}
	default:
		return func() Resource { return Resource(rng.IntN(n)) }
	}
}
