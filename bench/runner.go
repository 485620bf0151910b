package bench

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/concurkit/concurkit/internal/redact"
)

// Histogram range: 1 µs to 10 minutes in nanoseconds (the HdrHistogram
// log convention: values in ns, the interval max printed in ms), three
// significant digits.
const (
	histLowest  = int64(time.Microsecond)
	histHighest = int64(10 * time.Minute)
	histDigits  = 3
)

func newHist() *hdr.Histogram { return hdr.New(histLowest, histHighest, histDigits) }

func record(h *hdr.Histogram, d time.Duration) {
	v := int64(d)
	if v < histLowest {
		v = histLowest
	}
	if v > histHighest {
		v = histHighest
	}
	_ = h.RecordValue(v)
}

// cellRun runs one cell's load.
type cellRun struct {
	s     *Settings
	cell  Cell
	wl    workload
	ch    chooser
	exec  executor
	seed  uint64
	index uint64 // the cell's number in the run, for the random streams
}

// workerTotals are one worker's counters; read after the worker ended.
type workerTotals struct {
	ok, okStarted, committed, rejected, reads int64
	retries, gaveUp, failed, unknown          int64
	releaseErrors, missed, totalOK            int64
	aborts                                    [numClasses]int64
	lastEnd                                   time.Time
	errSample                                 error
	tallies                                   tallies
	attempts                                  []int64 // [n]: operations that took n attempts
}

// maxAttempts caps the attempts-per-operation histogram: more count as
// maxAttempts.
const maxAttempts = 1 << 12

// attempt counts one operation that took n attempts.
func (wt *workerTotals) attempt(n int64) {
	n = min(max(n, 1), maxAttempts)
	if int(n) >= len(wt.attempts) {
		wt.attempts = append(wt.attempts, make([]int64, int(n)+1-len(wt.attempts))...)
	}
	wt.attempts[n]++
}

// attemptStats returns the 99th percentile and the maximum of a histogram
// of attempts per operation (0, 0 when it is empty).
func attemptStats(h []int64) (p99, most int64) {
	var total int64
	for n, c := range h {
		total += c
		if c > 0 {
			most = int64(n)
		}
	}
	if total == 0 {
		return 0, 0
	}
	// The smallest n with at least 99% of the operations at or below it.
	var seen int64
	for n, c := range h {
		seen += c
		if seen*100 >= total*99 {
			return int64(n), most
		}
	}
	return most, most
}

// aboveShare is the share of h's values above v.
func aboveShare(h *hdr.Histogram, v int64) float64 {
	total := h.TotalCount()
	if total == 0 {
		return 0
	}
	var above int64
	for _, b := range h.Distribution() {
		if b.From > v {
			above += b.Count
		}
	}
	return float64(above) / float64(total)
}

// hists are the cell's latency histograms, shared by the workers.
type hists struct {
	mu                 sync.Mutex
	lat, svc           *hdr.Histogram // current interval
	latTotal, svcTotal *hdr.Histogram
	log                *hdr.HistogramLogWriter
	buf                bytes.Buffer
	intervalStart      time.Time
	intervals          int
	cellID             string
}

func newHists(id string) *hists {
	h := &hists{lat: newHist(), svc: newHist(), latTotal: newHist(), svcTotal: newHist()}
	h.log = hdr.NewHistogramLogWriter(&h.buf)
	h.cellID = id
	return h
}

func (h *hists) start(ws time.Time) {
	h.intervalStart = ws
	ms := ws.UnixMilli()
	h.log.SetBaseTime(ms)
	_ = h.log.OutputLogFormatVersion()
	_ = h.log.OutputComment("[concurkit bench cell " + h.cellID + "; values in ns; Tag=latency from the intended start, Tag=service from the actual start]")
	_ = h.log.OutputStartTime(ms)
	_ = h.log.OutputBaseTime(ms)
	_ = h.log.OutputLegend()
}

// flush closes the current interval at now: it goes into the log and the
// totals.
func (h *hists) flush(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range []struct {
		tag    string
		h, tot *hdr.Histogram
	}{{"latency", h.lat, h.latTotal}, {"service", h.svc, h.svcTotal}} {
		x.h.SetTag(x.tag)
		x.h.SetStartTimeMs(h.intervalStart.UnixMilli())
		x.h.SetEndTimeMs(now.UnixMilli())
		_ = h.log.OutputIntervalHistogram(x.h)
		x.tot.Merge(x.h)
		x.h.Reset()
	}
	h.intervalStart = now
	h.intervals++
}

func (h *hists) add(lat, svc time.Duration) {
	h.mu.Lock()
	record(h.lat, lat)
	record(h.svc, svc)
	h.mu.Unlock()
}

func summarize(h *hdr.Histogram) Latency {
	ms := func(v int64) float64 { return float64(v) / 1e6 }
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		Count: h.TotalCount(),
		Mean:  h.Mean() / 1e6,
		P50:   ms(h.ValueAtQuantile(50)),
		P95:   ms(h.ValueAtQuantile(95)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   ms(h.Max()),
	}
}

// run drives the load and returns the cell's metrics (without the
// database-side ones: syncs, check) and the clients' tallies.
func (r *cellRun) run(ctx context.Context) (*CellResult, tallies) {
	s, cell := r.s, r.cell
	id := cell.ID()
	res := &CellResult{Cell: cell, ID: id, Status: StatusOK}
	h := newHists(id)

	// Closed loop: each worker first completes one operation (connections
	// opened, lock clients dialled, statements prepared), and the warmup
	// and window start when the last one has: on a loaded machine a first
	// operation can outlast a short window, which would then measure
	// nothing. Its outcome counts for the correctness check only.
	var (
		t0, ws, we, drainEnd time.Time
		begin                = make(chan struct{})
		firstDone            sync.WaitGroup
	)
	closed := cell.Mode != ModeOpen
	if closed {
		firstDone.Add(cell.Workers)
	}
	var queue chan time.Time
	var issued atomic.Int64
	totals := make([]*workerTotals, cell.Workers)
	var wg sync.WaitGroup
	for i := range cell.Workers {
		wt := &workerTotals{tallies: tallies{}}
		totals[i] = wt
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(r.seed, r.index<<20|uint64(i)))
			rec := &recorder{}
			fn := r.exec.worker(rec)
			var o op
			if closed {
				r.first(ctx, fn, rng, &o, wt)
				firstDone.Done()
			}
			<-begin
			for {
				var intended time.Time
				if queue != nil {
					var ok bool
					intended, ok = <-queue
					if !ok {
						return
					}
					if now := time.Now(); now.After(drainEnd) {
						// Never started: count it and its latency so far.
						wt.missed++
						h.add(now.Sub(intended), 0)
						continue
					}
				} else {
					intended = time.Now()
					if !intended.Before(we) || ctx.Err() != nil {
						return
					}
					if s.Ops > 0 && issued.Add(1) > s.Ops {
						return
					}
				}
				r.wl.next(rng, r.ch, &o)
				*rec = recorder{}
				start := time.Now()
				octx, cancel := context.WithTimeout(ctx, s.OpTimeout)
				out, err := fn(octx, &o)
				cancel()
				end := time.Now()

				started := !intended.Before(ws) && intended.Before(we)
				completed := !end.Before(ws) && end.Before(we)
				wt.releaseErrors += rec.releaseErrors
				if err == nil {
					wt.totalOK++
					if out == resDone {
						wt.tallies.ack(&o)
					}
				} else {
					switch final(err) {
					case finalGaveUp:
						rec.gaveUp(err)
						if started {
							wt.gaveUp++
						}
					case finalFailed:
						if started {
							wt.failed++
						}
					default:
						wt.tallies.unknown(&o)
						if started {
							wt.unknown++
						}
					}
					if wt.errSample == nil {
						wt.errSample = err
					}
				}
				if started {
					h.add(end.Sub(intended), end.Sub(start))
					wt.attempt(rec.retries + 1)
					wt.retries += rec.retries
					for c, n := range rec.aborts {
						wt.aborts[c] += n
					}
					if err == nil {
						wt.okStarted++
					}
				}
				if completed && err == nil {
					wt.ok++
					wt.lastEnd = end
					switch out {
					case resDone:
						wt.committed++
					case resRejected:
						wt.rejected++
					case resRead:
						wt.reads++
					}
				}
			}
		})
	}

	firstDone.Wait()
	t0 = time.Now()
	ws = t0.Add(s.Warmup)
	we = ws.Add(s.Duration)
	// Open loop: operations still queued this long after the window are
	// given up as missed rather than drained.
	drainEnd = we.Add(s.Duration / 2)
	h.start(ws)
	if !closed {
		queue = r.dispatch(ctx, t0, we, cell.Rate)
	}
	close(begin)

	// Interval log: one interval per s.Interval of the window; the last
	// one also takes the tail (operations that ended after the window).
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if d := time.Until(ws); d > 0 {
		select {
		case <-time.After(d):
		case <-done:
		}
	}
	tick := time.NewTicker(s.Interval)
	defer tick.Stop()
loop:
	for {
		select {
		case now := <-tick.C:
			if now.Before(we) {
				h.flush(now)
			}
		case <-done:
			break loop
		}
	}
	h.flush(time.Now())

	var sample error
	windowEnd := we
	if s.Ops > 0 {
		// The cell may have ended early at its operation count.
		var last time.Time
		for _, wt := range totals {
			if wt.lastEnd.After(last) {
				last = wt.lastEnd
			}
		}
		if last.After(ws) && last.Before(we) {
			windowEnd = last
		}
	}
	res.Seconds = windowEnd.Sub(ws).Seconds()
	all := tallies{}
	var okStarted int64
	var attempts []int64
	res.Aborts = map[string]int64{}
	for _, wt := range totals {
		if len(wt.attempts) > len(attempts) {
			attempts = append(attempts, make([]int64, len(wt.attempts)-len(attempts))...)
		}
		for n, c := range wt.attempts {
			attempts[n] += c
		}
		res.Ops += wt.ok
		res.Committed += wt.committed
		res.Rejected += wt.rejected
		res.Reads += wt.reads
		res.Retries += wt.retries
		res.GaveUp += wt.gaveUp
		res.Failed += wt.failed
		res.Unknown += wt.unknown
		res.ReleaseErrors += wt.releaseErrors
		res.Missed += wt.missed
		res.TotalCommitted += wt.totalOK
		okStarted += wt.okStarted
		for c, n := range wt.aborts {
			if n > 0 {
				res.Aborts[classNames[c]] += n
			}
		}
		if sample == nil && wt.errSample != nil {
			sample = wt.errSample
		}
		all.merge(wt.tallies)
	}
	if sample != nil {
		res.ErrorSample = redact.Error(sample, append([]string{s.postgresURL, s.mysqlDSN}, s.mysqlDSNs...)...).Error()
	}
	if res.Seconds > 0 {
		res.Throughput = float64(res.Ops) / res.Seconds
	}
	if okStarted > 0 {
		res.RetriesPerOp = float64(res.Retries) / float64(okStarted)
		var aborts int64
		for _, n := range res.Aborts {
			aborts += n
		}
		res.AbortsPerOp = float64(aborts) / float64(okStarted)
	}
	res.Latency = summarize(h.latTotal)
	res.AttemptsP99, res.AttemptsMax = attemptStats(attempts)
	if o := s.SLO; o != nil && h.latTotal.TotalCount() > 0 {
		at := float64(h.latTotal.ValueAtQuantile(o.Percentile)) / 1e6
		above := aboveShare(h.latTotal, int64(o.Latency))
		res.SLOLatency, res.AboveSLO = &at, &above
	}
	res.Service = summarize(h.svcTotal)
	res.hlog = h.buf.Bytes()
	return res, all
}

// first runs a closed-loop worker's first operation, before the warmup:
// only the correctness check's tallies see it.
func (r *cellRun) first(ctx context.Context, fn opFunc, rng *rand.Rand, o *op, wt *workerTotals) {
	if ctx.Err() != nil {
		return
	}
	r.wl.next(rng, r.ch, o)
	octx, cancel := context.WithTimeout(ctx, r.s.OpTimeout)
	out, err := fn(octx, o)
	cancel()
	switch {
	case err == nil:
		wt.totalOK++
		if out == resDone {
			wt.tallies.ack(o)
		}
	case final(err) == finalUnknown:
		wt.tallies.unknown(o)
	}
}

// dispatch sends the intended start times of an open-loop cell at rate
// ops/s from t0 until end, then closes the channel. A full queue blocks the
// dispatcher, never shifts the times: latency is measured from the time an
// operation was due, so a slow system is charged for the operations that
// waited (no coordinated omission).
func (r *cellRun) dispatch(ctx context.Context, t0, end time.Time, rate float64) chan time.Time {
	n := int(rate*end.Sub(t0).Seconds()) + 16
	n = min(n, 1<<20)
	q := make(chan time.Time, n)
	rng := rand.New(rand.NewPCG(r.seed, r.index<<20|0xfffff))
	gap := func() time.Duration {
		if r.s.Arrival == ArrivalFixed {
			return time.Duration(float64(time.Second) / rate)
		}
		return time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
	}
	go func() {
		defer close(q)
		next := t0
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			now := time.Now()
			for !next.After(now) {
				if !next.Before(end) {
					return
				}
				select {
				case q <- next:
				case <-ctx.Done():
					return
				}
				next = next.Add(gap())
			}
			timer.Reset(next.Sub(now))
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return q
}
