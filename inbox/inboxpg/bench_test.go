package inboxpg_test

import (
	"context"
	"crypto/rand"
	_ "github.com/concurkit/concurkit/migrations/migrationsmysql"
	_ "github.com/concurkit/concurkit/migrations/migrationspg"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/inbox/inboxpg"
	"github.com/concurkit/concurkit/migrations"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/testkit"
)

// BenchmarkHandle measures what the inbox adds to a handler's
// transaction, one client, the same effect (one INSERT) each time. Every
// iteration runs the three cases back to back, so that the load of a
// shared machine hits them alike, and reports the median of each and the
// ratios:
//
//   - bare: pessimisticpg.InTx running the effect (BEGIN, INSERT, COMMIT:
//     3 round trips);
//   - new: Handle of a new id (BEGIN, record, INSERT, COMMIT: 4);
//   - dup: Handle of a recorded id (BEGIN, record, lock, COMMIT: 4, no
//     effect; the lock's commit is flushed, so that a duplicate is only
//     reported once the record is durable).
func BenchmarkHandle(b *testing.B) {
	ctx := context.Background()
	u := testkit.PostgresURL(b)
	if err := migrations.Up(ctx, migrations.Postgres, u); err != nil {
		b.Fatal(err)
	}
	pool := testkit.PostgresPoolFor(b, u)
	if _, err := pool.Exec(ctx, `CREATE TABLE effects (id text PRIMARY KEY)`); err != nil {
		b.Fatal(err)
	}
	ib, err := inboxpg.New(pool, nil)
	if err != nil {
		b.Fatal(err)
	}
	effect := func(id string) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects (id) VALUES ($1)`, id)
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
		if err := pessimisticpg.InTx(ctx, pool, nil, effect("bare"+id)); err != nil {
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
	report(b, bare, fresh, again)
}

func report(b *testing.B, bare, fresh, again []time.Duration) {
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
