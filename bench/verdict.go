package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// tie is the relative throughput difference below which two strategies are
// called equal in the verdicts: on a shared machine, run-to-run noise is of
// that order.
const tie = 0.10

// Verdict says, for one database and workload, which strategy to use at
// which contention, in sentences (Lines) backed by the numbers (Points).
type Verdict struct {
	DB       string         `json:"db"`
	Workload string         `json:"workload"` // "mixed:share" for the mixed workload
	Lines    []string       `json:"lines"`
	Points   []VerdictPoint `json:"points"`
	// SLOChoice is the strategy the run's SLO names (the one that meets
	// it at the highest offered load), empty when none meets it or the run
	// has no SLO.
	SLOChoice string `json:"slo_choice,omitempty"`
}

// VerdictPoint ranks the correct toolkit strategies at one contention level
// (closed loop).
type VerdictPoint struct {
	Contention string  `json:"contention"`
	Dist       string  `json:"dist"`
	Rows       int     `json:"rows"`
	Theta      float64 `json:"theta,omitempty"`
	Workers    int     `json:"workers"`
	// WritersPerRow is Workers/Rows (uniform keys only).
	WritersPerRow float64 `json:"writers_per_row,omitempty"`
	// Ranking lists the strategies, fastest first.
	Ranking []Ranked `json:"ranking"`
}

// Ranked is one strategy's throughput at a VerdictPoint.
type Ranked struct {
	Strategy     string  `json:"strategy"`
	Throughput   float64 `json:"throughput"`
	RetriesPerOp float64 `json:"retries_per_op"`
	GaveUp       int64   `json:"gave_up"`
}

func workloadLabel(c Cell) string {
	if c.ReadMode != "" {
		return c.Workload + ":" + c.ReadMode
	}
	return c.Workload
}

func ops(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ops/s", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ops/s", v)
	}
	return fmt.Sprintf("%.2f ops/s", v)
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "∞×"
	}
	return fmt.Sprintf("%.1f×", a/b)
}

func wpr(v float64) string {
	if v >= 1 {
		return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", v), "0"), ".")
	}
	return fmt.Sprintf("%.2g", v)
}

// verdicts derives the verdicts of every database and workload of sum.
func verdicts(sum *Summary) []Verdict {
	type key struct{ db, wl string }
	var keys []key
	byKey := map[key][]CellResult{}
	for _, c := range sum.Cells {
		k := key{c.DB, workloadLabel(c.Cell)}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	var out []Verdict
	for _, k := range keys {
		v := verdict(sum, k.db, k.wl, byKey[k])
		if len(v.Lines) > 0 {
			out = append(out, v)
		}
	}
	return out
}

// reshapes reports whether a strategy changes the shape of the work
// (StrategyInfo.Reshapes).
func reshapes(strategy string) bool {
	d := lookupStrategy(strategy)
	return d != nil && d.Reshapes
}

// interactive returns the fastest strategy of p that runs one transaction
// per change, and false when p has none.
func interactive(p *VerdictPoint) (Ranked, bool) {
	for _, r := range p.Ranking {
		if !reshapes(r.Strategy) {
			return r, true
		}
	}
	return Ranked{}, false
}

func kindOf(strategy string) string {
	if d := lookupStrategy(strategy); d != nil {
		return d.Kind
	}
	return KindPeer
}

func verdict(sum *Summary, db, wl string, cells []CellResult) Verdict {
	v := Verdict{DB: db, Workload: wl}
	add := func(format string, args ...any) { v.Lines = append(v.Lines, fmt.Sprintf(format, args...)) }
	srv := sum.server(db)
	galera := srv != nil && srv.Label != ""

	// Correctness first: a lost update is the headline, not a footnote.
	for _, c := range cells {
		if c.Check.Status != CheckFailed {
			continue
		}
		if kindOf(c.Strategy) == KindLossy {
			add("%s (deliberately unsafe) FAILED the check at %s × %s, as it must: %s", c.Strategy, c.Contention(), plural(c.Workers, "worker"), c.Check.Detail)
		} else {
			add("FAILED: %s lost or invented updates at %s × %s: %s — do not use it until fixed", c.Strategy, c.Contention(), plural(c.Workers, "worker"), c.Check.Detail)
		}
	}

	// Closed-loop points of correct toolkit strategies.
	type pkey struct {
		dist    string
		rows, w int
		theta   float64
	}
	points := map[pkey]*VerdictPoint{}
	var pkeys []pkey
	ref := map[pkey]CellResult{}
	for _, c := range cells {
		if c.Mode != ModeClosed || c.Status != StatusOK || c.Check.Status != CheckPassed {
			continue
		}
		pk := pkey{c.Dist, c.Rows, c.Workers, c.Theta}
		if kindOf(c.Strategy) == KindReference {
			ref[pk] = c
			continue
		}
		if kindOf(c.Strategy) != KindToolkit {
			continue
		}
		p := points[pk]
		if p == nil {
			p = &VerdictPoint{Contention: c.Contention(), Dist: c.Dist, Rows: c.Rows, Theta: c.Theta, Workers: c.Workers}
			if c.Dist == DistUniform {
				p.WritersPerRow = float64(c.Workers) / float64(c.Rows)
			}
			points[pk] = p
			pkeys = append(pkeys, pk)
		}
		p.Ranking = append(p.Ranking, Ranked{Strategy: c.Strategy, Throughput: c.Throughput, RetriesPerOp: c.RetriesPerOp, GaveUp: c.GaveUp})
	}
	for _, p := range points {
		slices.SortStableFunc(p.Ranking, func(a, b Ranked) int { return cmp.Compare(b.Throughput, a.Throughput) })
	}
	var uni, zipf []*VerdictPoint
	for _, pk := range pkeys {
		p := points[pk]
		if len(p.Ranking) == 0 {
			continue
		}
		if p.Dist == DistZipf {
			zipf = append(zipf, p)
		} else {
			uni = append(uni, p)
		}
	}
	// Hottest first.
	slices.SortStableFunc(uni, func(a, b *VerdictPoint) int {
		if c := cmp.Compare(b.WritersPerRow, a.WritersPerRow); c != 0 {
			return c
		}
		return cmp.Compare(b.Workers, a.Workers)
	})
	slices.SortStableFunc(zipf, func(a, b *VerdictPoint) int {
		if c := cmp.Compare(a.Workers, b.Workers); c != 0 {
			return c
		}
		return cmp.Compare(a.Theta, b.Theta)
	})
	for _, p := range uni {
		v.Points = append(v.Points, *p)
	}
	for _, p := range zipf {
		v.Points = append(v.Points, *p)
	}
	if len(uni) == 0 && len(zipf) == 0 {
		sloVerdict(sum, &v, cells)
		return v
	}

	describe := func(p *VerdictPoint) string {
		best := p.Ranking[0]
		s := fmt.Sprintf("%s (%s)", best.Strategy, ops(best.Throughput))
		for _, r := range p.Ranking[1:min(len(p.Ranking), 4)] {
			s += fmt.Sprintf(", %s %s slower", r.Strategy, ratio(best.Throughput, r.Throughput))
			if r.RetriesPerOp >= 0.1 {
				s += fmt.Sprintf(" (%.1f retries/op)", r.RetriesPerOp)
			}
		}
		return s
	}
	if len(uni) > 0 {
		hot, cold := uni[0], uni[len(uni)-1]
		add("Hottest: %s × %s (%s writers per row): use %s.", hot.Contention, plural(hot.Workers, "worker"), wpr(hot.WritersPerRow), describe(hot))
		if cold != hot {
			add("Coldest: %s × %s (%s writers per row): %s.", cold.Contention, plural(cold.Workers, "worker"), wpr(cold.WritersPerRow), describe(cold))
		}
		// Rows sweep at the most common worker count: the ranges of rows
		// over which one strategy wins.
		if line := rangesLine(uni, "hot rows", func(p *VerdictPoint) float64 { return float64(p.Rows) }); line != "" {
			add("%s", line)
		}
		if line := crossover(uni, "cas", "for-update"); line != "" {
			add("%s", line)
		}
		if best, ok := interactive(hot); ok && reshapes(hot.Ranking[0].Strategy) && best.Throughput > 0 {
			add("%s changes the shape of the work (many changes per commit, or a row spread over shards): %s the best interactive strategy (%s, %s) at the hottest point.",
				hot.Ranking[0].Strategy, ratio(hot.Ranking[0].Throughput, best.Throughput), best.Strategy, ops(best.Throughput))
		}
		if srv != nil && srv.Ceiling > 0 {
			for _, p := range uni {
				best, ok := interactive(p)
				if p.Rows == 1 && ok {
					why := "PostgreSQL holds the row lock until the commit record is flushed, so hot-row commits cannot overlap their flushes"
					if db == MariaDB {
						why = "InnoDB releases row locks before the log flush and groups commits, so a hot row can pass this ceiling"
					}
					add("On the hot row (%s) the best interactive strategy reaches %.0f%% of the durable ceiling (%s, %s): %s.",
						plural(p.Workers, "worker"), 100*best.Throughput/srv.Ceiling, ops(srv.Ceiling), srv.CeilingSource, why)
					break
				}
			}
		}
		pk := pkey{DistUniform, hot.Rows, hot.Workers, 0}
		if r, ok := ref[pk]; ok {
			if best, ok := interactive(hot); ok && best.Throughput > 0 {
				if r.Throughput >= best.Throughput*(1-tie) {
					add("A single UPDATE statement (single-update, the reference) does %s the best read-modify-write at the hottest point (%s): when the change fits one statement, no strategy is needed.",
						ratio(r.Throughput, best.Throughput), ops(r.Throughput))
				} else if n := deadlocksOf("single-update", cells); n > 0 && galera {
					add("single-update (%s) is no ceiling here: on Galera its statements fail certification when another node's write of the row commits first (%d errors 1213 in this workload, retried), while the best strategy (%s) does %s.",
						ops(r.Throughput), n, best.Strategy, ops(best.Throughput))
				} else if n > 0 {
					add("single-update (%s) is no ceiling here: its statements run in the workload's order and deadlock (%d deadlocks in this workload), while the best strategy (%s) locks in key order.",
						ops(r.Throughput), n, ops(best.Throughput))
				} else {
					add("In this run the single UPDATE (single-update, %s) was slower than the best read-modify-write (%s, %s) at the hottest point, which it should bound from above: the run was noisy; compare on a quiet machine.",
						ops(r.Throughput), best.Strategy, ops(best.Throughput))
				}
			}
		}
	}
	if len(zipf) > 0 {
		if line := rangesLine(zipf, "Zipfian θ", func(p *VerdictPoint) float64 { return p.Theta }); line != "" {
			add("%s", line)
		}
	}
	// Operations given up: reported, never hidden.
	type gu struct {
		strategy string
		n        int64
		where    string
	}
	var gus []gu
	for _, c := range cells {
		if c.GaveUp > 0 && kindOf(c.Strategy) != KindLossy {
			gus = append(gus, gu{c.Strategy, c.GaveUp, fmt.Sprintf("%s × %s (%s)", c.Contention(), plural(c.Workers, "worker"), c.Mode)})
		}
	}
	slices.SortStableFunc(gus, func(a, b gu) int { return cmp.Compare(b.n, a.n) })
	for i, g := range gus {
		if i == 3 {
			add("… and %d more cells with operations given up (see the table).", len(gus)-3)
			break
		}
		add("%s gave up on %s at %s: its retry budget (the library default) ran out — raise the budget or choose a strategy that queues.", g.strategy, plural(int(g.n), "operation"), g.where)
	}
	if line := galeraLine(srv, cells); line != "" {
		add("%s", line)
	}
	if line := deadlockLine(db, galera, cells); line != "" {
		add("%s", line)
	}
	if line := openLine(cells); line != "" {
		add("%s", line)
	}
	sloVerdict(sum, &v, cells)
	return v
}

// sloVerdict adds the SLO line to v when the run has an SLO.
func sloVerdict(sum *Summary, v *Verdict, cells []CellResult) {
	if o := sum.slo(); o != nil {
		if choice, line := sloLine(*o, cells); line != "" {
			v.SLOChoice = choice
			v.Lines = append(v.Lines, line)
		}
	}
}

// sloLine judges by the latency target o at the hottest point that has
// open-loop cells: each correct toolkit strategy meets o at an offered load
// when its latency at o's percentile is within the target and it kept up
// (committed at least 90% of the offered rate); the choice is the strategy
// that meets o at the highest offered load. Without open-loop cells it
// names the fastest closed-loop strategy within the target. choice is
// empty when none meets it.
func sloLine(o SLO, cells []CellResult) (choice, line string) {
	target := float64(o.Latency) / 1e6
	type point struct {
		dist    string
		rows, w int
		theta   float64
	}
	var open, closed []CellResult
	for _, c := range cells {
		if c.Status != StatusOK || c.Check.Status != CheckPassed || kindOf(c.Strategy) != KindToolkit || c.SLOLatency == nil {
			continue
		}
		if c.Mode == ModeOpen {
			open = append(open, c)
		} else {
			closed = append(closed, c)
		}
	}
	// The hottest point: most writers per row for uniform keys, else the
	// highest θ; ties to more workers.
	hotter := func(a, b CellResult) bool {
		wa, wb := float64(a.Workers)/float64(max(a.Rows, 1)), float64(b.Workers)/float64(max(b.Rows, 1))
		if (a.Dist == DistUniform) != (b.Dist == DistUniform) {
			return a.Dist == DistUniform
		}
		if a.Dist == DistUniform && wa != wb {
			return wa > wb
		}
		if a.Theta != b.Theta {
			return a.Theta > b.Theta
		}
		return a.Workers > b.Workers
	}
	pick := open
	if len(pick) == 0 {
		pick = closed
	}
	if len(pick) == 0 {
		return "", ""
	}
	hot := pick[0]
	for _, c := range pick[1:] {
		if hotter(c, hot) {
			hot = c
		}
	}
	at := point{hot.Dist, hot.Rows, hot.Workers, hot.Theta}
	var here []CellResult
	for _, c := range pick {
		if (point{c.Dist, c.Rows, c.Workers, c.Theta}) == at {
			here = append(here, c)
		}
	}
	where := fmt.Sprintf("%s × %s", hot.Contention(), plural(hot.Workers, "worker"))
	meets := func(c CellResult) bool { return *c.SLOLatency <= target }
	lowest := here[0]
	for _, c := range here {
		if *c.SLOLatency < *lowest.SLOLatency {
			lowest = c
		}
	}
	none := func(mode string) string {
		rate := ""
		if lowest.Mode == ModeOpen {
			rate = " at " + ops(lowest.Rate) + " offered"
		}
		return fmt.Sprintf("SLO %s at %s (%s): no strategy meets it at any load measured; the lowest was %s's (%.1f ms%s).",
			o, where, mode, lowest.Strategy, *lowest.SLOLatency, rate)
	}
	if len(open) == 0 {
		// Closed loop: the fastest strategy within the target.
		slices.SortStableFunc(here, func(a, b CellResult) int { return cmp.Compare(b.Throughput, a.Throughput) })
		for i, c := range here {
			if !meets(c) {
				continue
			}
			line := fmt.Sprintf("SLO %s at %s (closed loop; open-loop cells judge it at an offered load): use %s (%s, p%s %.1f ms)",
				o, where, c.Strategy, ops(c.Throughput), pct(o.Percentile), *c.SLOLatency)
			if i > 0 {
				f := here[0]
				line += fmt.Sprintf("; %s is faster (%s) but misses it (%.1f ms)", f.Strategy, ops(f.Throughput), *f.SLOLatency)
			}
			return c.Strategy, line + "."
		}
		return "", none("closed loop")
	}
	// Open loop: the highest offered load each strategy meets the target
	// at; strategies measured at this point in closed loop only are named.
	var unmeasured []string
	for _, c := range closed {
		if (point{c.Dist, c.Rows, c.Workers, c.Theta}) == at && !slices.ContainsFunc(here, func(o CellResult) bool { return o.Strategy == c.Strategy }) &&
			!slices.Contains(unmeasured, c.Strategy) {
			unmeasured = append(unmeasured, c.Strategy)
		}
	}
	note := ""
	if len(unmeasured) > 0 {
		note = " Not measured in open loop here: " + strings.Join(unmeasured, ", ") + " (--open-strategies)."
	}
	type reach struct {
		strategy string
		rate     float64 // highest offered load met; 0: none
		miss     *CellResult
	}
	by := map[string]*reach{}
	var order []string
	for _, c := range here {
		r := by[c.Strategy]
		if r == nil {
			r = &reach{strategy: c.Strategy}
			by[c.Strategy] = r
			order = append(order, c.Strategy)
		}
		if meets(c) && c.Throughput >= 0.9*c.Rate {
			r.rate = max(r.rate, c.Rate)
		} else if r.miss == nil || c.Rate < r.miss.Rate {
			r.miss = &c
		}
	}
	var rs []*reach
	for _, name := range order {
		rs = append(rs, by[name])
	}
	slices.SortStableFunc(rs, func(a, b *reach) int { return cmp.Compare(b.rate, a.rate) })
	if rs[0].rate == 0 {
		return "", none("open loop") + note
	}
	var parts []string
	for i, r := range rs {
		switch {
		case r.rate > 0 && i == 0:
			parts = append(parts, fmt.Sprintf("%s meets it up to %s offered", r.strategy, ops(r.rate)))
		case r.rate > 0:
			parts = append(parts, fmt.Sprintf("%s up to %s", r.strategy, ops(r.rate)))
		default:
			m := r.miss
			parts = append(parts, fmt.Sprintf("%s at none of the loads measured (%.1f ms at %s)", r.strategy, *m.SLOLatency, ops(m.Rate)))
		}
	}
	return rs[0].strategy, fmt.Sprintf("SLO %s at %s (open loop, latency from the intended start): use %s — %s.%s",
		o, where, rs[0].strategy, strings.Join(parts, "; "), note)
}

// pct formats a percentile: 99, 99.9.
func pct(p float64) string { return strconv.FormatFloat(p, 'g', -1, 64) }

// rangesLine groups points that share the other parameters (the most
// common worker count) by the value x (rows or θ) and names the winner of
// each range of x, treating a lead below tie as a tie.
func rangesLine(points []*VerdictPoint, what string, x func(*VerdictPoint) float64) string {
	count := map[int]int{}
	for _, p := range points {
		count[p.Workers]++
	}
	w, best := 0, 0
	for k, n := range count {
		if n > best || n == best && k > w {
			w, best = k, n
		}
	}
	var sweep []*VerdictPoint
	for _, p := range points {
		if p.Workers == w {
			sweep = append(sweep, p)
		}
	}
	if len(sweep) < 2 {
		return ""
	}
	slices.SortStableFunc(sweep, func(a, b *VerdictPoint) int { return cmp.Compare(x(a), x(b)) })
	winners := func(p *VerdictPoint) []string {
		top := p.Ranking[0]
		out := []string{top.Strategy}
		for _, r := range p.Ranking[1:] {
			if top.Throughput > 0 && r.Throughput >= top.Throughput*(1-tie) {
				out = append(out, r.Strategy)
			}
		}
		return out
	}
	type span struct {
		from, to float64
		who      []string
	}
	var spans []span
	for _, p := range sweep {
		who := winners(p)
		if n := len(spans); n > 0 {
			last := &spans[n-1]
			// Same leader: extend the range; the strategies that tie it
			// across the whole range are named with it.
			if who[0] == last.who[0] {
				last.to = x(p)
				last.who = intersectKeepFirst(last.who, who)
				continue
			}
		}
		spans = append(spans, span{x(p), x(p), who})
	}
	num := func(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%g", v), ".0") }
	var parts []string
	for _, s := range spans {
		r := num(s.from)
		if s.to != s.from {
			r += "–" + num(s.to)
		}
		names := s.who[0]
		if len(s.who) > 1 {
			names += " (≈ " + strings.Join(s.who[1:], ", ") + " within 10%)"
		}
		if what == "hot rows" {
			unit := "hot rows"
			if s.to == 1 {
				unit = "hot row"
			}
			parts = append(parts, fmt.Sprintf("%s %s → %s", r, unit, names))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s → %s", what, r, names))
		}
	}
	return fmt.Sprintf("Fastest correct strategy with %s: %s.", plural(w, "worker"), strings.Join(parts, "; "))
}

func intersectKeepFirst(a, b []string) []string {
	out := []string{a[0]}
	for _, s := range a[1:] {
		if slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// crossover compares an optimistic and a pessimistic strategy across
// writers per row: above which density the lock wins clearly, below which
// the optimistic one is as fast.
func crossover(points []*VerdictPoint, opt, pess string) string {
	type pt struct{ wpr, r, retries float64 }
	var pts []pt
	for _, p := range points {
		var o, q *Ranked
		for i := range p.Ranking {
			switch p.Ranking[i].Strategy {
			case opt:
				o = &p.Ranking[i]
			case pess:
				q = &p.Ranking[i]
			}
		}
		if o == nil || q == nil || o.Throughput <= 0 {
			continue
		}
		pts = append(pts, pt{p.WritersPerRow, q.Throughput / o.Throughput, o.RetriesPerOp})
	}
	if len(pts) < 2 {
		return ""
	}
	slices.SortStableFunc(pts, func(a, b pt) int { return cmp.Compare(a.wpr, b.wpr) })
	// M: the smallest density from which pess always wins by more than tie.
	m := -1
	for i := len(pts) - 1; i >= 0 && pts[i].r > 1+tie; i-- {
		m = i
	}
	// N: the largest density up to which opt is always within tie or ahead.
	n := -1
	for i := 0; i < len(pts) && pts[i].r <= 1+tie; i++ {
		n = i
	}
	var parts []string
	if m >= 0 {
		lo, hi := math.Inf(1), 0.0
		for _, p := range pts[m:] {
			lo, hi = min(lo, p.r), max(hi, p.r)
		}
		f := fmt.Sprintf("%.1f×", lo)
		if hi-lo >= 0.1 {
			f = fmt.Sprintf("%.1f–%.1f×", lo, hi)
		}
		why := fmt.Sprintf(" (%s: %.1f retries/op there)", opt, pts[len(pts)-1].retries)
		if pts[len(pts)-1].retries < 0.05 {
			// Few retries yet far slower: the time went into waiting
			// (row locks, deadlock detection), not into retrying.
			why = fmt.Sprintf(" (%s waits there: its writes lock rows until commit)", opt)
		}
		parts = append(parts, fmt.Sprintf("at ≥ %s writers per row %s is %s faster than %s%s",
			wpr(pts[m].wpr), pess, f, opt, why))
	}
	if n >= 0 {
		parts = append(parts, fmt.Sprintf("at ≤ %s writers per row %s is as fast (within 10%%) or faster: use it there, it holds no lock between round trips",
			wpr(pts[n].wpr), opt))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%s and %s trade places irregularly in this run: see the table.", opt, pess)
	}
	s := strings.Join(parts, "; ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// openLine reports each strategy's p99 latency at the offered load closest
// to 0.9 of its maximum (the knee of the hockey stick).
func openLine(cells []CellResult) string {
	best := map[string]CellResult{}
	var order []string
	for _, c := range cells {
		if c.Mode != ModeOpen || c.Status != StatusOK || c.Latency.Count == 0 {
			continue
		}
		rates, err := ParseRates(c.RateSpec)
		if err != nil || len(rates) != 1 || rates[0].OfMax == 0 {
			continue
		}
		prev, ok := best[c.Strategy]
		if !ok {
			order = append(order, c.Strategy)
		}
		if pr, _ := ParseRates(prev.RateSpec); !ok || math.Abs(rates[0].OfMax-0.9) < math.Abs(pr[0].OfMax-0.9) {
			best[c.Strategy] = c
		}
	}
	if len(order) == 0 {
		return ""
	}
	var parts []string
	var where string
	for _, s := range order {
		c := best[s]
		where = fmt.Sprintf("%s × %s", c.Contention(), plural(c.Workers, "worker"))
		parts = append(parts, fmt.Sprintf("%s p99 %.1f ms at %s of its maximum (%s offered)", s, c.Latency.P99, c.RateSpec, ops(c.Rate)))
	}
	return fmt.Sprintf("Open loop (%s, latency from the intended start): %s; beyond the maximum the queue, and latency, grow without bound.", where, strings.Join(parts, "; "))
}

// deadlocksOf counts the deadlocks strategy met in cells.
func deadlocksOf(strategy string, cells []CellResult) int64 {
	var n int64
	for _, c := range cells {
		if c.Strategy == strategy {
			n += c.Aborts[classNames[classDeadlock]]
		}
	}
	return n
}

// deadlockLine reports the strategies that met deadlocks (retried, but each
// costs the server's detection delay).
func deadlockLine(db string, galera bool, cells []CellResult) string {
	counts := map[string]int64{}
	var order []string
	for _, c := range cells {
		if n := c.Aborts[classNames[classDeadlock]]; n > 0 && kindOf(c.Strategy) != KindLossy {
			if counts[c.Strategy] == 0 {
				order = append(order, c.Strategy)
			}
			counts[c.Strategy] += n
		}
	}
	if len(order) == 0 {
		return ""
	}
	var parts []string
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%s %d", s, counts[s]))
	}
	why := "InnoDB detects them at once, but each costs a rollback and a retry"
	if db == Postgres {
		why = "PostgreSQL detects a deadlock only after deadlock_timeout (1 s by default), which is what sinks random-order transactions on hot rows"
	}
	if galera {
		var conflicts int64
		for _, c := range cells {
			if c.Galera != nil {
				conflicts += c.Galera.Conflicts
			}
		}
		return fmt.Sprintf("Error 1213 (retried): %s — on Galera it also reports a certification conflict with another node's commit (%d counted by the nodes in this workload), which taking the locks in key order does not prevent.",
			strings.Join(parts, ", "), conflicts)
	}
	return fmt.Sprintf("Deadlocks (retried): %s — %s; take the locks in key order (for-update, advisory and the lock strategies do).", strings.Join(parts, ", "), why)
}

// galeraLine says what multi-primary replication did to FOR UPDATE in
// this run, from the hottest closed-loop for-update cell's measured
// conflicts: a row lock is local to its node, so transactions on two
// nodes that lock the same row both run, and the later to commit fails
// certification (or is aborted by the replicated write) and retries.
// Empty unless srv is a Galera cluster with such a cell.
func galeraLine(srv *Server, cells []CellResult) string {
	if srv == nil || srv.Label == "" {
		return ""
	}
	var hot *CellResult
	hotter := func(a, b *CellResult) bool {
		wa, wb := float64(a.Workers)/float64(a.Rows), float64(b.Workers)/float64(b.Rows)
		if wa != wb {
			return wa > wb
		}
		return a.Workers > b.Workers
	}
	type point struct{ rows, workers int }
	cas := map[point]*CellResult{}
	for i := range cells {
		c := &cells[i]
		if c.Mode != ModeClosed || c.Dist != DistUniform || c.Status != StatusOK || c.Galera == nil {
			continue
		}
		switch c.Strategy {
		case "for-update":
			if hot == nil || hotter(c, hot) {
				hot = c
			}
		case "cas":
			cas[point{c.Rows, c.Workers}] = c
		}
	}
	if hot == nil {
		return ""
	}
	g := hot.Galera
	nodes := 0
	for _, n := range g.NodeConns {
		if n > 0 {
			nodes++
		}
	}
	where := fmt.Sprintf("%s × %s, connections on %s", hot.Contention(), plural(hot.Workers, "worker"), plural(nodes, "node"))
	if g.Conflicts == 0 {
		if nodes < 2 {
			return fmt.Sprintf("On %s every for-update connection was on one node (%s): no certification conflict, FOR UPDATE waited there as on a single server.", srv.Label, where)
		}
		return fmt.Sprintf("On %s for-update met no certification conflict at its hottest point (%s, %.2f retries/op): its transactions did not overlap across nodes in this run.",
			srv.Label, where, hot.RetriesPerOp)
	}
	line := fmt.Sprintf("On %s FOR UPDATE does not wait across nodes: at %s, for-update met %d certification conflicts "+
		"(%d failed certification at COMMIT, %d aborted by a replicated write) for %d committed operations, %.2f retries/op (%s) — "+
		"a row lock holds only on its own node, so conflicting transactions on two nodes both ran and the later committer got error 1213 and retried: "+
		"across nodes FOR UPDATE behaves like optimistic concurrency",
		srv.Label, where, g.Conflicts, g.CertFailures, g.BFAborts, hot.TotalCommitted, hot.RetriesPerOp, ops(hot.Throughput))
	if c := cas[point{hot.Rows, hot.Workers}]; c != nil {
		line += fmt.Sprintf(" (cas there: %d conflicts, %.2f retries/op, %s)", c.Galera.Conflicts, c.RetriesPerOp, ops(c.Throughput))
	}
	return line + "."
}
