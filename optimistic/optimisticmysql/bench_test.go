package optimisticmysql_test

import (
	"testing"
	"time"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticmysql"
)

// BenchmarkUpdateVsHandWritten compares Update with the
// hand-written CAS it replaces (UPDATE … SET …, version = version + 1
// WHERE id = ? AND version = ?, RowsAffected checked) on a *sql.DB (where
// Update also arms the KILL QUERY cancellation) and on a *sql.Conn.
// Each iteration runs one of each, alternating which goes first, so that
// both see the same load on a shared machine; it reports their mean
// latencies and the ratio Update / hand-written.
func BenchmarkUpdateVsHandWritten(b *testing.B) {
	db := myDB(b)
	ctx := b.Context()
	if _, err := db.ExecContext(ctx, "INSERT INTO counters (id) VALUES (1)"); err != nil {
		b.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	tbl := optimistic.Table{Name: "counters", KeyColumn: "id", VersionColumn: "version"}
	const handWritten = "UPDATE `counters` SET `value` = ?, `version` = `version` + 1 WHERE `id` = ? AND `version` = ?"
	version := int64(1)
	for _, h := range []struct {
		name string
		db   optimisticmysql.DBTX
	}{{"DB", db}, {"Conn", conn}} {
		b.Run(h.name, func(b *testing.B) {
			hand := func(i int) {
				res, err := h.db.ExecContext(ctx, handWritten, i, 1, version)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := res.RowsAffected(); err != nil || n != 1 {
					b.Fatalf("%d rows, %v", n, err)
				}
				version++
			}
			ours := func(i int) {
				var err error
				if version, err = optimisticmysql.Update(ctx, h.db, tbl, 1, version, map[string]any{"value": i}); err != nil {
					b.Fatal(err)
				}
			}
			var tHand, tOurs time.Duration
			for i := 0; b.Loop(); i++ {
				first, second, t1, t2 := hand, ours, &tHand, &tOurs
				if i%2 == 1 {
					first, second, t1, t2 = ours, hand, &tOurs, &tHand
				}
				start := time.Now()
				first(i)
				mid := time.Now()
				second(i)
				*t1 += mid.Sub(start)
				*t2 += time.Since(mid)
			}
			b.ReportMetric(float64(tHand.Nanoseconds())/float64(b.N), "hand-ns/cas")
			b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "Update-ns/cas")
			b.ReportMetric(float64(tOurs)/float64(tHand), "ratio")
		})
	}
}
