package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/testkit"
)

// TestDSNListSkipsDeadNode: in a DSN list whose first node refuses
// connections, the admin (setup, check) goes to the next node, every
// connection of a spread pool lands on the live node, and none of it
// waits for the dead one.
func TestDSNListSkipsDeadNode(t *testing.T) {
	live := testkit.MySQLServerDSN(t)
	cfg, err := mysql.ParseDSN(live)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:1" // nothing listens: the dial is refused
	dead := cfg.FormatDSN()
	s, err := (&Config{DBs: []string{MariaDB}, MySQLDSN: dead + "," + live, Schema: testkit.Name("ck_bench_")}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	e, err := openMariaDB(ctx, s, nil, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	if e.adminNode != 1 || e.galera {
		t.Errorf("admin node %d, galera %v; want node 1 (the live one), not galera", e.adminNode, e.galera)
	}
	if e.nodes[0].Timeout != nodeDialTimeout {
		t.Errorf("a listed node without timeout= dials with timeout %v, want %v", e.nodes[0].Timeout, nodeDialTimeout)
	}
	if err := e.setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.drop(context.WithoutCancel(ctx)) }()
	db, rr, err := e.dbFor(4, true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 4 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if got := rr.Opened(); !slices.Equal(got, []int64{0, 4}) {
		t.Errorf("connections by node %v, want [0 4]", got)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v: the refused node was waited for", d)
	}
}
