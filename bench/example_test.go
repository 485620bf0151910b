package bench_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/concurkit/concurkit/bench"
)

// Run a tiny grid on the test PostgreSQL server (CONCURKIT_POSTGRES_URL, or
// the one scripts/services.sh starts): two strategies on one hot row with
// two workers, then write the result files.
func ExampleRun() {
	sum, err := bench.Run(context.Background(), &bench.Config{
		DBs:        []string{bench.Postgres},
		Schema:     fmt.Sprintf("concurkit_bench_example_%d", os.Getpid()),
		Grid:       bench.GridFast,
		Strategies: []string{"for-update", "single-update"},
		Rows:       []int{1},
		Workers:    []int{2},
		Duration:   100 * time.Millisecond,
		Rates:      []bench.Rate{}, // no open-loop cells
		SyncProbe:  -1,             // skip the disk and commit-loop measurements
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range sum.Cells {
		fmt.Println(c.ID, c.Status, c.Check.Status)
	}
	dir, err := os.MkdirTemp("", "concurkit-bench-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	files, err := sum.WriteFiles(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(files), "files")
	// Output:
	// postgres/counter/for-update/rows=1/w=2/closed ok PASSED
	// postgres/counter/single-update/rows=1/w=2/closed ok PASSED
	// 5 files
}

func ExampleParseRates() {
	rates, err := bench.ParseRates("500,x0.9")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rates {
		fmt.Printf("%s: %v ops/s, %v of the maximum\n", r, r.PerSec, r.OfMax)
	}
	_, err = bench.ParseRates("fast")
	fmt.Println(err)
	// Output:
	// 500: 500 ops/s, 0 of the maximum
	// x0.9: 0 ops/s, 0.9 of the maximum
	// concurkit: invalid argument: bench: rate "fast": want ops/s (500), a fraction of the maximum (x0.9) or auto
}

// A latency target for the verdicts (Config.SLO, --slo): the strategy that
// meets p99 ≤ 50 ms at the highest offered load.
func ExampleParseSLO() {
	slo, err := bench.ParseSLO("p99=50ms")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(slo, slo.Percentile, slo.Latency)
	cfg := &bench.Config{SLO: slo, Rates: []bench.Rate{{OfMax: 0.5}, {OfMax: 0.9}}}
	fmt.Println(cfg.SLO)
	_, err = bench.ParseSLO("p100=50ms")
	fmt.Println(err)
	// Output:
	// p99=50ms 99 50ms
	// p99=50ms
	// concurkit: invalid argument: bench: SLO percentile 100: want one in (0, 100), e.g. 99
}

// Compare a run with an earlier one (what --baseline does): cells are
// matched by ID and a drop beyond the tolerance is flagged.
func ExampleCompare() {
	cell := bench.Cell{DB: bench.Postgres, Workload: bench.Counter, Strategy: "cas", Dist: bench.DistUniform, Rows: 1, Workers: 8, Mode: bench.ModeClosed}
	result := func(tput float64) bench.CellResult {
		return bench.CellResult{Cell: cell, ID: cell.ID(), Status: bench.StatusOK, Throughput: tput, Check: bench.Check{Status: bench.CheckPassed}}
	}
	before := &bench.Summary{RunID: "before", Cells: []bench.CellResult{result(1000)}}
	after := &bench.Summary{RunID: "after", Cells: []bench.CellResult{result(700)}}
	c := bench.Compare(before, after, 0.10)
	for _, d := range c.Deltas {
		fmt.Printf("%s: %.2f× (regression: %v, %s)\n", d.ID, d.Ratio, d.Regression, d.Reason)
	}
	// Output:
	// postgres/counter/cas/rows=1/w=8/closed: 0.70× (regression: true, throughput 70% of baseline)
}

func ExampleStrategies() {
	for _, s := range bench.Strategies() {
		fmt.Println(s.Name, s.Kind, s.DBs, s.Hidden)
	}
	// Output:
	// cas toolkit [postgres mariadb] false
	// for-update toolkit [postgres mariadb] false
	// for-no-key-update toolkit [postgres] false
	// nowait toolkit [postgres mariadb] false
	// serializable toolkit [postgres mariadb] false
	// advisory toolkit [postgres] false
	// redis-fenced toolkit [postgres mariadb] false
	// etcd-fenced toolkit [postgres mariadb] false
	// escrow toolkit [postgres mariadb] false
	// combine toolkit [postgres mariadb] false
	// transfer-batch toolkit [postgres mariadb] false
	// sharded toolkit [postgres mariadb] false
	// adaptive toolkit [postgres mariadb] false
	// single-update reference [postgres mariadb] false
	// lossy lossy [postgres mariadb] true
}
