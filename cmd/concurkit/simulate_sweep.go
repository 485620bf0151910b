package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/concurkit/concurkit/deadlock"
)

// sweepHot are the contention points: the number of hot resources that
// receive --hot-fraction of all accesses (1 = everybody fights over one row).
var sweepHot = [...]int{1, 3, 10, 30, 100, 300, 1000, 3000, 10000}

type sweepPoint struct {
	hot int
	res *deadlock.Result
}

// runSweep compares every policy over contention on otherwise identical
// seeded workloads (the shape of Yu et al., VLDB 2014, "Staring into the
// Abyss"), prints the tables and, with --out, writes them as sweep.md with
// two plots.
func runSweep(ctx context.Context, f simulateFlags, victim deadlock.Victim, stdout io.Writer) error {
	wl := f.wl
	wl.Resources = max(wl.Resources, sweepHot[len(sweepHot)-1])
	policies := deadlock.AllPolicies()
	results := make(map[deadlock.Policy][]sweepPoint)
	for _, hot := range sweepHot {
		wl.HotResources = hot
		txns, err := wl.Generate()
		if err != nil {
			return err
		}
		for _, p := range policies {
			if err := ctx.Err(); err != nil {
				return err
			}
			res, err := deadlock.Simulate(ctx, txns, f.options(p, victim))
			if err != nil {
				return fmt.Errorf("sweep hot=%d %s: %w", hot, p, err)
			}
			if err := res.CheckSerializable(); err != nil {
				return fmt.Errorf("sweep hot=%d %s: %w", hot, p, err)
			}
			results[p] = append(results[p], sweepPoint{hot: hot, res: res})
		}
		fmt.Fprintf(stdout, "hot=%d done\n", hot)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Policy comparison over contention\n\n")
	fmt.Fprintf(&md, "Workload: seed %d, %d transactions x %d steps, read ratio %.2f, %d resources of which `hot` receive %.0f%% of accesses; concurrency %d; op time %s; lock timeout %s; detection period %s. Logical time.\n\n",
		wl.Seed, wl.Transactions, wl.Length, wl.ReadRatio, wl.Resources, 100*wl.HotFraction, f.concurrency, f.opTime, f.timeout, f.interval)
	fmt.Fprintf(&md, "Throughput (committed tx per logical second):\n\n| hot |")
	for _, p := range policies {
		fmt.Fprintf(&md, " %s |", p)
	}
	fmt.Fprintf(&md, "\n|---:|")
	for range policies {
		fmt.Fprintf(&md, "---:|")
	}
	for i, hot := range sweepHot {
		fmt.Fprintf(&md, "\n| %d |", hot)
		for _, p := range policies {
			fmt.Fprintf(&md, " %.0f |", results[p][i].res.Throughput)
		}
	}
	fmt.Fprintf(&md, "\n\nAborts per committed transaction:\n\n| hot |")
	for _, p := range policies {
		fmt.Fprintf(&md, " %s |", p)
	}
	fmt.Fprintf(&md, "\n|---:|")
	for range policies {
		fmt.Fprintf(&md, "---:|")
	}
	for i, hot := range sweepHot {
		fmt.Fprintf(&md, "\n| %d |", hot)
		for _, p := range policies {
			r := results[p][i].res
			fmt.Fprintf(&md, " %.2f |", float64(r.Aborts.Total())/float64(r.Committed))
		}
	}
	md.WriteString("\n")
	fmt.Fprint(stdout, "\n", md.String())
	if f.out == "" {
		fmt.Fprintln(stdout, "\n(--out DIR writes these tables as sweep.md with the plots sweep.png and sweep-aborts.png)")
		return nil
	}
	if err := writeFile(filepath.Join(f.out, "sweep.md"), func(w io.Writer) error {
		_, err := io.WriteString(w, md.String())
		return err
	}); err != nil {
		return err
	}
	if err := sweepPlot(filepath.Join(f.out, "sweep.png"), "Throughput vs contention", "committed tx / logical s", false, policies, results,
		func(r *deadlock.Result) float64 { return r.Throughput }); err != nil {
		return err
	}
	if err := sweepPlot(filepath.Join(f.out, "sweep-aborts.png"), "Aborts vs contention", "aborts per commit (+0.01)", true, policies, results,
		func(r *deadlock.Result) float64 { return float64(r.Aborts.Total())/float64(r.Committed) + 0.01 }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s, %s, %s\n", filepath.Join(f.out, "sweep.md"), filepath.Join(f.out, "sweep.png"), filepath.Join(f.out, "sweep-aborts.png"))
	return nil
}

func sweepPlot(path, title, ylabel string, legendTop bool, policies []deadlock.Policy, results map[deadlock.Policy][]sweepPoint, y func(*deadlock.Result) float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "hot resources (fewer = more contention)"
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = legendTop // right, where the curves are not
	var lines []any
	for _, pol := range policies {
		pts := make(plotter.XYs, len(results[pol]))
		for i, sp := range results[pol] {
			pts[i].X = float64(sp.hot)
			pts[i].Y = math.Max(y(sp.res), 1e-3)
		}
		lines = append(lines, pol.String(), pts)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
