package inboxmysql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/concurkit/concurkit/inbox/inboxmysql"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/pessimistic/pessimisticmysql"
	"github.com/concurkit/concurkit/testkit"
)

// BenchmarkHandle: as inboxpg's (bare, new, dup back to back in every
// iteration; medians and ratios), on MariaDB.
func BenchmarkHandle(b *testing.B) {
	ctx := context.Background()
	dsn := testkit.MySQLDSN(b)
	if err := migrations.Up(ctx, migrations.MySQL, dsn); err != nil {
		b.Fatal(err)
	}
	db := testkit.MySQLFor(b, dsn)
	if _, err := db.ExecContext(ctx, `CREATE TABLE effects (id VARBINARY(255) PRIMARY KEY) ENGINE=InnoDB`); err != nil {
		b.Fatal(err)
	}
	ib, err := inboxmysql.New(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	effect := func(id string) func(context.Context, *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (id) VALUES (?)`, id)
			return err
		}
	}
	run, dup := rand.Text(), rand.Text() // unique across -count runs
	if ok, err := ib.Handle(ctx, "bench", dup, effect(dup)); !ok || err != nil {
		b.Fatal(ok, err)
	}
	var bare, fresh, again []time.Duration
	i := 0
	for b.Loop() {
		i++
		id := run + strconv.Itoa(i)
		t0 := time.Now()
		if err := pessimisticmysql.InTx(ctx, db, nil, effect("bare"+id)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if ok, err := ib.Handle(ctx, "bench", id, effect(id)); !ok || err != nil {
			b.Fatal(ok, err)
		}
		t2 := time.Now()
		if ok, err := ib.Handle(ctx, "bench", dup, effect(dup)); ok || err != nil {
			b.Fatal(ok, err)
		}
		bare, fresh, again = append(bare, t1.Sub(t0)), append(fresh, t2.Sub(t1)), append(again, time.Since(t2))
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	pb, pn, pd := p50(bare), p50(fresh), p50(again)
	b.ReportMetric(pb, "bare-µs")
	b.ReportMetric(pn, "new-µs")
	b.ReportMetric(pd, "dup-µs")
	b.ReportMetric(pn/pb, "new/bare")
	b.ReportMetric(pd/pb, "dup/bare")
}
