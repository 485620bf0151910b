package bench

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
)

func TestResolveDefaults(t *testing.T) {
	t.Setenv("CONCURKIT_POSTGRES_URL", "")
	t.Setenv("CONCURKIT_MYSQL_DSN", "")
	var nilCfg *Config
	s, err := nilCfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if s.Grid != GridQuick || !slices.Equal(s.DBs, []string{Postgres, MariaDB}) || !slices.Equal(s.Workloads, []string{Counter}) {
		t.Errorf("defaults: grid %q dbs %v workloads %v", s.Grid, s.DBs, s.Workloads)
	}
	if s.postgresURL != DefaultPostgresURL || s.mysqlDSN != DefaultMySQLDSN || s.Schema != DefaultSchema {
		t.Errorf("endpoints: %q %q %q", s.postgresURL, s.mysqlDSN, s.Schema)
	}
	if s.Duration != time.Second || !s.Cross || s.BaseWorkers != 8 || len(s.Rates) != 3 {
		t.Errorf("quick preset: %+v", s)
	}
}

func TestResolveRedactsPasswords(t *testing.T) {
	s, err := (&Config{PostgresURL: "postgres://u:secret@h/db", MySQLDSN: "u:secret@tcp(h:3306)/"}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.PostgresURL+s.MySQLDSN, "secret") {
		t.Errorf("summary shows a password: %q %q", s.PostgresURL, s.MySQLDSN)
	}
}

func TestResolveRejectsBadInput(t *testing.T) {
	for name, c := range map[string]Config{
		"db":             {DBs: []string{"oracle"}},
		"workload":       {Workloads: []string{"ledger"}},
		"strategy":       {Strategies: []string{"yolo"}},
		"open strategy":  {OpenStrategies: []string{"yolo"}},
		"grid":           {Grid: "huge"},
		"rows 0":         {Rows: []int{0}},
		"rows too many":  {Rows: []int{MaxKeys + 1}},
		"workers 0":      {Workers: []int{0}},
		"zipf negative":  {Zipf: []float64{-0.5}},
		"zipf NaN":       {Zipf: []float64{math.NaN()}},
		"keys":           {Keys: 1},
		"duration":       {Duration: time.Millisecond},
		"ops":            {Ops: -1},
		"rate both":      {Rates: []Rate{{PerSec: 1, OfMax: 1}}},
		"rate none":      {Rates: []Rate{{}}},
		"arrival":        {Arrival: "bursty"},
		"read ratio":     {ReadRatio: 1.5},
		"reads":          {Reads: []string{"dirty"}},
		"schema":         {Schema: "Robert'); DROP TABLE students;--"},
		"schema upper":   {Schema: "Bench"},
		"stock":          {Stock: -1},
		"negative delay": {Interval: -time.Second},
		"slo percentile": {SLO: &SLO{Percentile: 100, Latency: time.Millisecond}},
		"slo latency":    {SLO: &SLO{Percentile: 99}},
	} {
		if _, err := c.resolve(); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestResolveDSNList: a comma-separated MySQLDSN is one DSN per node,
// trimmed, recorded with each password redacted.
func TestResolveDSNList(t *testing.T) {
	s, err := (&Config{MySQLDSN: "u:pw1@tcp(h1:3306)/, u:pw2@tcp(h2:3306)/x ,u@tcp(h3)/"}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"u:pw1@tcp(h1:3306)/", "u:pw2@tcp(h2:3306)/x", "u@tcp(h3)/"}; !slices.Equal(s.mysqlDSNs, want) {
		t.Errorf("nodes %q, want %q", s.mysqlDSNs, want)
	}
	if want := []string{"u:xxxxx@tcp(h1:3306)/", "u:xxxxx@tcp(h2:3306)/x", "u@tcp(h3)/"}; !slices.Equal(s.MySQLNodes, want) {
		t.Errorf("MySQLNodes %q, want %q", s.MySQLNodes, want)
	}
	if want := "u:xxxxx@tcp(h1:3306)/,u:xxxxx@tcp(h2:3306)/x,u@tcp(h3)/"; s.MySQLDSN != want {
		t.Errorf("MySQLDSN %q, want %q", s.MySQLDSN, want)
	}
	one, err := (&Config{MySQLDSN: "u:pw@tcp(h:3306)/"}).resolve()
	if err != nil || len(one.mysqlDSNs) != 1 || one.MySQLNodes != nil {
		t.Errorf("one DSN: nodes %q, MySQLNodes %q, err %v", one.mysqlDSNs, one.MySQLNodes, err)
	}
}

// TestResolveDSNListRejectsBadInput: an empty element or a DSN that does
// not parse is refused before any I/O, naming the element and showing no
// password; a list the run does not use (no mariadb) is not checked.
func TestResolveDSNListRejectsBadInput(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"u:secret@tcp(h1)/,,u:secret@tcp(h3)/", "mysql DSN 2 of 3"},
		{"u:secret@tcp(h1)/,", "mysql DSN 2 of 2"},
		{",u:secret@tcp(h1)/", "mysql DSN 1 of 2"},
		{" , ", "is empty"},
		{"u:secret@tcp(h1)/,u:secret@tcp(h2", "mysql DSN 2 of 2"},
		{"u:secret@tcp(h1)/,nonsense", "invalid DSN"},
		{"u:secret@tcp(h1)", "invalid DSN"},
	} {
		_, err := (&Config{DBs: []string{MariaDB}, MySQLDSN: c.dsn}).resolve()
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%q: err = %v, want ErrInvalidArgument", c.dsn, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "secret") {
			t.Errorf("%q: error %q: want it to say %q and hide the password", c.dsn, msg, c.want)
		}
	}
	if _, err := (&Config{DBs: []string{Postgres}, MySQLDSN: "u@tcp(h1)/,,"}).resolve(); err != nil {
		t.Errorf("postgres only, bad mysql list: %v", err)
	}
}

func TestParseRates(t *testing.T) {
	got, err := ParseRates("500, x0.9,auto")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2+len(autoRates) || got[0] != (Rate{PerSec: 500}) || got[1] != (Rate{OfMax: 0.9}) {
		t.Errorf("ParseRates = %v", got)
	}
	if got[1].String() != "x0.9" || got[0].String() != "500" {
		t.Errorf("String: %q %q", got[1], got[0])
	}
	for _, bad := range []string{"x", "-5", "0", "x-1", "fast", "Inf"} {
		if _, err := ParseRates(bad); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("ParseRates(%q): err = %v", bad, err)
		}
	}
	if r, err := ParseRates(""); err != nil || len(r) != 0 {
		t.Errorf(`ParseRates("") = %v, %v`, r, err)
	}
}

func TestParseSLO(t *testing.T) {
	for in, want := range map[string]SLO{
		"p99=50ms":     {99, 50 * time.Millisecond},
		" p99.9=1.5s ": {99.9, 1500 * time.Millisecond},
		"p50=1ns":      {50, 1},
	} {
		got, err := ParseSLO(in)
		if err != nil || got == nil || *got != want {
			t.Errorf("ParseSLO(%q) = %v, %v; want %v", in, got, err, want)
			continue
		}
		if back, err := ParseSLO(got.String()); err != nil || *back != want {
			t.Errorf("ParseSLO(%q.String() = %q) = %v, %v", in, got.String(), back, err)
		}
	}
	for _, bad := range []string{"p99", "99=50ms", "p100=5ms", "p0=5ms", "p-1=5ms", "pNaN=5ms", "pInf=5ms",
		"p99=0s", "p99=-5ms", "p99=fast", "p99=50", "p=50ms", "=", "p99=50ms=1"} {
		if o, err := ParseSLO(bad); !errors.Is(err, concurkit.ErrInvalidArgument) || o != nil {
			t.Errorf("ParseSLO(%q) = %v, %v; want ErrInvalidArgument", bad, o, err)
		}
	}
	if o, err := ParseSLO(""); o != nil || err != nil {
		t.Errorf(`ParseSLO("") = %v, %v`, o, err)
	}
}

// FuzzParseSLO: any input is an SLO whose String parses back to it, or an
// ErrInvalidArgument; never a panic.
func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{"p99=50ms", "p99.9=1.5s", "p50=1ns", "p0=1s", "p99=-1ms", "", "="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseSLO(s)
		switch {
		case err != nil:
			if !errors.Is(err, concurkit.ErrInvalidArgument) || o != nil {
				t.Fatalf("ParseSLO(%q) = %v, %v", s, o, err)
			}
		case o == nil:
			if strings.TrimSpace(s) != "" {
				t.Fatalf("ParseSLO(%q) = nil, nil", s)
			}
		default:
			if o.valid() != nil {
				t.Fatalf("ParseSLO(%q) = %v: invalid", s, o)
			}
			back, err := ParseSLO(o.String())
			if err != nil || *back != *o {
				t.Fatalf("ParseSLO(%q) = %v; its String %q parses to %v, %v", s, o, o.String(), back, err)
			}
		}
	})
}

func TestAttemptStats(t *testing.T) {
	for _, c := range []struct {
		h         []int64
		p99, most int64
	}{
		{nil, 0, 0},
		{[]int64{0, 5}, 1, 1},
		{[]int64{0, 98, 1, 0, 1}, 2, 4},     // 99 of 100 within 2; one starved writer took 4
		{[]int64{0, 990, 9, 0, 0, 1}, 1, 5}, // 99% took one attempt
		{[]int64{0, 1, 0, 1}, 3, 3},
	} {
		if p99, most := attemptStats(c.h); p99 != c.p99 || most != c.most {
			t.Errorf("attemptStats(%v) = %d, %d; want %d, %d", c.h, p99, most, c.p99, c.most)
		}
	}
	var wt workerTotals
	for _, n := range []int64{1, 1, 3, 0, maxAttempts + 5} {
		wt.attempt(n)
	}
	if p99, most := attemptStats(wt.attempts); p99 != maxAttempts || most != maxAttempts || wt.attempts[1] != 3 || wt.attempts[3] != 1 {
		t.Errorf("attempt: %d, %d from %v", p99, most, wt.attempts[:4])
	}
}

func TestPlanQuickIsACross(t *testing.T) {
	s, err := (&Config{DBs: []string{Postgres}, Strategies: []string{"cas", "for-update", "advisory"}}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := s.plan()
	cells := plan[Postgres]
	// Per strategy: rows 1, 16, 256 at 8 workers + workers 1 and 4 at 1 row;
	// open loop (x0.5, x0.9, x1.2) for cas and for-update only.
	if want := 3*5 + 2*3; len(cells) != want {
		t.Fatalf("%d cells, want %d", len(cells), want)
	}
	seenOpen := false
	for _, c := range cells {
		if c.Mode == ModeOpen {
			seenOpen = true
			if c.Strategy == "advisory" || c.Rows != 1 || c.Workers != 8 {
				t.Errorf("open cell %s", c.ID())
			}
		} else if seenOpen {
			t.Errorf("closed cell %s after an open one: open rates need the closed maxima first", c.ID())
		}
	}
}

func TestPlanProductZipfAndTransfer(t *testing.T) {
	s, err := (&Config{
		DBs: []string{MariaDB}, Workloads: []string{Transfer, Mixed}, Strategies: []string{"cas", "advisory"},
		Rows: []int{1, 4}, Workers: []int{2, 3}, Zipf: []float64{0.99}, Rates: []Rate{}, Reads: []string{ReadShare},
	}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	plan, notes := s.plan()
	if len(notes) != 1 || !strings.Contains(notes[0], "advisory") {
		t.Errorf("notes = %q, want one about advisory on mariadb", notes)
	}
	var ids []string
	for _, c := range plan[MariaDB] {
		ids = append(ids, c.ID())
	}
	// Transfer needs two rows: rows=1 becomes 2.
	for _, want := range []string{
		"mariadb/transfer/cas/rows=2/w=2/closed", "mariadb/transfer/cas/rows=4/w=3/closed",
		"mariadb/transfer/cas/zipf=0.99,keys=10000/w=2/closed", "mariadb/mixed:share/cas/rows=1/w=3/closed",
	} {
		if !slices.Contains(ids, want) {
			t.Errorf("missing %s in %v", want, ids)
		}
	}
	if len(ids) != 2*(4+2) {
		t.Errorf("%d cells: %v", len(ids), ids)
	}
}

func TestCheckFindsLostUpdates(t *testing.T) {
	wl := workload{name: Counter}
	tl := tallies{}
	o := &op{changes: []change{{key: 1, dv: 1}}}
	for range 10 {
		tl.ack(o)
	}
	if c := wl.check(map[int64]rowState{1: {v: 10}}, 1, tl); c.Status != CheckPassed {
		t.Errorf("exact: %+v", c)
	}
	if c := wl.check(map[int64]rowState{1: {v: 9}}, 1, tl); c.Status != CheckFailed {
		t.Errorf("lost update: %+v", c)
	}
	// Two operations of unknown outcome: 10..12 are all correct.
	tl.unknown(o)
	tl.unknown(o)
	for v, want := range map[int64]string{9: CheckFailed, 10: CheckPassed, 12: CheckPassed, 13: CheckFailed} {
		if c := wl.check(map[int64]rowState{1: {v: v}}, 1, tl); c.Status != want {
			t.Errorf("v=%d with 2 unknown: %s (%s), want %s", v, c.Status, c.Detail, want)
		}
	}
	if c := wl.check(map[int64]rowState{}, 1, tallies{}); c.Status != CheckFailed {
		t.Errorf("missing row: %+v", c)
	}
}

func TestCheckInventoryAndTransfer(t *testing.T) {
	inv := workload{name: Inventory, initV: 5}
	tl := tallies{}
	sale := &op{changes: []change{{key: 1, dv: -1, dw: 1, floor: true}}}
	for range 5 {
		tl.ack(sale)
	}
	if c := inv.check(map[int64]rowState{1: {v: 0, w: 5}}, 1, tl); c.Status != CheckPassed {
		t.Errorf("sold out exactly: %+v", c)
	}
	if c := inv.check(map[int64]rowState{1: {v: -1, w: 6}}, 1, tl); c.Status != CheckFailed || !strings.Contains(c.Detail, "below 0") {
		t.Errorf("oversold: %+v", c)
	}
	tr := workload{name: Transfer, initV: 100}
	tt := tallies{}
	tt.ack(&op{changes: []change{{key: 1, dv: -7, floor: true}, {key: 2, dv: 7}}})
	if c := tr.check(map[int64]rowState{1: {v: 93}, 2: {v: 107}}, 2, tt); c.Status != CheckPassed {
		t.Errorf("transfer: %+v", c)
	}
	if c := tr.check(map[int64]rowState{1: {v: 100}, 2: {v: 107}}, 2, tt); c.Status != CheckFailed || !strings.Contains(c.Detail, "total") {
		t.Errorf("money created: %+v", c)
	}
}

func TestChangeApplyFloor(t *testing.T) {
	c := change{key: 1, dv: -3, floor: true}
	if _, _, ok := c.apply(2, 0); ok {
		t.Error("floor let stock go below 0")
	}
	if v, _, ok := c.apply(3, 0); !ok || v != 0 {
		t.Errorf("apply(3) = %d, %v", v, ok)
	}
}
