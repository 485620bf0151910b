package bench

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

type series struct {
	name string
	pts  plotter.XYs
}

type chart struct {
	file, title, x, y string
	logX, logY        bool
	series            []series
}

// writePlots renders the run's charts into dir and returns their file
// names. Per database and workload:
//   - throughput vs workers per strategy, on the hottest key set;
//   - throughput vs contention: hot rows (log scale) and Zipfian θ;
//   - retries per operation vs contention;
//   - p50 and p99 latency vs offered load from the open-loop cells (the
//     hockey stick).
//
// A chart needs two points on its x axis; cells that did not pass the
// correctness check are left out (a lossy strategy is not "fast").
func (s *Summary) writePlots(dir string) ([]string, error) {
	var charts []chart
	type key struct{ db, wl string }
	var keys []key
	groups := map[key][]CellResult{}
	for _, c := range s.Cells {
		if c.Status != StatusOK || c.Check.Status != CheckPassed {
			continue
		}
		k := key{c.DB, workloadLabel(c.Cell)}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], c)
	}
	for _, k := range keys {
		cells := groups[k]
		prefix := k.db + "-" + strings.ReplaceAll(k.wl, ":", "-")
		title := k.db + " " + k.wl
		var uni, zipf, open []CellResult
		for _, c := range cells {
			switch {
			case c.Mode == ModeOpen:
				open = append(open, c)
			case c.Dist == DistZipf:
				zipf = append(zipf, c)
			default:
				uni = append(uni, c)
			}
		}
		if len(uni) > 0 {
			minRows := slices.MinFunc(uni, func(a, b CellResult) int { return cmp.Compare(a.Rows, b.Rows) }).Rows
			hot := filter(uni, func(c CellResult) bool { return c.Rows == minRows })
			charts = append(charts, chart{
				file: prefix + "-throughput-vs-workers.png", title: fmt.Sprintf("%s: throughput vs workers (%s)", title, plural(minRows, "row")),
				x: "workers", y: "ops/s", series: bySeries(hot, func(c CellResult) float64 { return float64(c.Workers) },
					func(c CellResult) float64 { return c.Throughput }),
			})
			w := commonWorkers(uni)
			sweep := filter(uni, func(c CellResult) bool { return c.Workers == w })
			charts = append(charts, chart{
				file: prefix + "-throughput-vs-rows.png", title: fmt.Sprintf("%s: throughput vs hot rows (%d workers)", title, w),
				x: "hot rows", y: "ops/s", logX: true,
				series: bySeries(sweep, func(c CellResult) float64 { return float64(c.Rows) }, func(c CellResult) float64 { return c.Throughput }),
			}, chart{
				file: prefix + "-retries-vs-rows.png", title: fmt.Sprintf("%s: retries per op vs hot rows (%d workers)", title, w),
				x: "hot rows", y: "retries per committed op", logX: true,
				series: bySeries(sweep, func(c CellResult) float64 { return float64(c.Rows) }, func(c CellResult) float64 { return c.RetriesPerOp }),
			})
		}
		if len(zipf) > 0 {
			w := commonWorkers(zipf)
			sweep := filter(zipf, func(c CellResult) bool { return c.Workers == w })
			charts = append(charts, chart{
				file: prefix + "-throughput-vs-zipf.png", title: fmt.Sprintf("%s: throughput vs Zipf θ (%d workers, %d keys)", title, w, zipf[0].Rows),
				x: "θ", y: "ops/s",
				series: bySeries(sweep, func(c CellResult) float64 { return c.Theta }, func(c CellResult) float64 { return c.Throughput }),
			}, chart{
				file: prefix + "-retries-vs-zipf.png", title: fmt.Sprintf("%s: retries per op vs Zipf θ (%d workers)", title, w),
				x: "θ", y: "retries per committed op",
				series: bySeries(sweep, func(c CellResult) float64 { return c.Theta }, func(c CellResult) float64 { return c.RetriesPerOp }),
			})
		}
		if len(open) > 0 {
			var ss []series
			for _, q := range []struct {
				name string
				f    func(CellResult) float64
			}{{"p99", func(c CellResult) float64 { return c.Latency.P99 }}, {"p50", func(c CellResult) float64 { return c.Latency.P50 }}} {
				for _, x := range bySeries(open, func(c CellResult) float64 { return c.Rate }, q.f) {
					x.name += " " + q.name
					ss = append(ss, x)
				}
			}
			charts = append(charts, chart{
				file: prefix + "-latency-vs-load.png", title: fmt.Sprintf("%s: latency vs offered load (%s, %d workers)", title, open[0].Contention(), open[0].Workers),
				x: "offered ops/s", y: "latency from intended start, ms", logY: true, series: ss,
			})
		}
	}
	var files []string
	for _, ch := range charts {
		ok, err := ch.save(filepath.Join(dir, ch.file))
		if err != nil {
			return files, fmt.Errorf("bench: plot %s: %w", ch.file, err)
		}
		if ok {
			files = append(files, ch.file)
		}
	}
	return files, nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func filter(cells []CellResult, keep func(CellResult) bool) []CellResult {
	var out []CellResult
	for _, c := range cells {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// commonWorkers returns the worker count with the most distinct
// contention values (the sweep's fixed worker count), the largest on a tie.
func commonWorkers(cells []CellResult) int {
	seen := map[int]map[string]bool{}
	for _, c := range cells {
		if seen[c.Workers] == nil {
			seen[c.Workers] = map[string]bool{}
		}
		seen[c.Workers][c.Contention()] = true
	}
	w, n := 0, -1
	for k, v := range seen {
		if len(v) > n || len(v) == n && k > w {
			w, n = k, len(v)
		}
	}
	return w
}

// bySeries makes one series per strategy, sorted by x.
func bySeries(cells []CellResult, x, y func(CellResult) float64) []series {
	var names []string
	m := map[string]plotter.XYs{}
	for _, c := range cells {
		if _, ok := m[c.Strategy]; !ok {
			names = append(names, c.Strategy)
		}
		m[c.Strategy] = append(m[c.Strategy], plotter.XY{X: x(c), Y: y(c)})
	}
	var out []series
	for _, n := range names {
		pts := m[n]
		slices.SortFunc(pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		out = append(out, series{n, pts})
	}
	return out
}

// save renders the chart; it reports false (and writes nothing) when no
// series has two points to draw.
func (ch chart) save(path string) (bool, error) {
	p := plot.New()
	p.Title.Text = ch.title
	p.X.Label.Text = ch.x
	p.Y.Label.Text = ch.y
	p.Legend.Top = true
	if ch.logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if ch.logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	var args []any
	for _, s := range ch.series {
		var pts plotter.XYs
		for _, pt := range s.pts {
			if (ch.logX && pt.X <= 0) || (ch.logY && pt.Y <= 0) {
				continue // not drawable on a log axis
			}
			pts = append(pts, pt)
		}
		if len(pts) < 2 {
			continue
		}
		args = append(args, s.name, pts)
	}
	if len(args) == 0 {
		return false, nil
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return false, err
	}
	return true, p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}
