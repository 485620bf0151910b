package fencedpg_test

import (
	"context"
	"testing"
	"time"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

// sideBySide runs hand and lib, one call each per iteration in
// alternating order, so both see the same server, cache and machine load,
// and reports the time of each per call and their ratio (lib/hand).
func sideBySide(b *testing.B, hand, lib func(i int64) error) {
	var handT, libT time.Duration
	var i int64
	timed := func(f func(int64) error, total *time.Duration) {
		t0 := time.Now()
		if err := f(i); err != nil {
			b.Fatal(err)
		}
		*total += time.Since(t0)
	}
	for b.Loop() {
		i++
		// Alternate the order, so neither call always runs first.
		if i%2 == 0 {
			timed(hand, &handT)
			timed(lib, &libT)
		} else {
			timed(lib, &libT)
			timed(hand, &handT)
		}
	}
	b.ReportMetric(float64(handT.Nanoseconds())/float64(i), "hand-ns/op")
	b.ReportMetric(float64(libT.Nanoseconds())/float64(i), "fenced-ns/op")
	b.ReportMetric(float64(libT)/float64(handT), "ratio")
}

// BenchmarkUpdate: the guarded UPDATE written by hand against
// fencedpg.Update on the same table (one hot row each, one client), with
// and without the version column.
func BenchmarkUpdate(b *testing.B) {
	ctx := context.Background()
	pg := pgPool(b)
	if _, err := pg.Exec(ctx, pgAccounts+"; INSERT INTO accounts (id) VALUES (1), (2)"); err != nil {
		b.Fatal(err)
	}
	var tok int64 // increasing across both rows and sub-benchmarks
	for _, c := range []struct {
		name  string
		table fenced.Table
		hand  string
	}{
		{"plain", accounts, `UPDATE accounts SET max_seen_token = $2, amount = $3 WHERE id = $1 AND max_seen_token <= $2`},
		{"versioned", fenced.Table{Name: "accounts", VersionColumn: "version"},
			`UPDATE accounts SET max_seen_token = $2, version = version + 1, amount = $3 WHERE id = $1 AND max_seen_token <= $2`},
	} {
		b.Run(c.name, func(b *testing.B) {
			sideBySide(b, func(i int64) error {
				tok++
				tag, err := pg.Exec(ctx, c.hand, 2, tok, i)
				if err == nil && tag.RowsAffected() != 1 {
					b.Fatal("hand-written update refused")
				}
				return err
			}, func(i int64) error {
				tok++
				return fencedpg.Update(ctx, pg, c.table, 1, fenced.Token(tok), map[string]any{"amount": i})
			})
		})
	}
}

// BenchmarkWrite: the plain upsert a guarded write replaces against
// fencedpg.Write, so the guard's whole cost (SQL and client) is visible.
func BenchmarkWrite(b *testing.B) {
	ctx := context.Background()
	pg := pgPool(b)
	if _, err := pg.Exec(ctx, pgAccounts); err != nil {
		b.Fatal(err)
	}
	sideBySide(b, func(i int64) error {
		_, err := pg.Exec(ctx, `INSERT INTO accounts (id, amount) VALUES (2, $1) ON CONFLICT (id) DO UPDATE SET amount = EXCLUDED.amount`, i)
		return err
	}, func(i int64) error {
		return fencedpg.Write(ctx, pg, accounts, 1, fenced.Token(i), map[string]any{"amount": i})
	})
}

// BenchmarkClientSide: the client-side cost alone (a recording DBTX, no
// server): fencedpg.Update against the same Exec call written by hand.
func BenchmarkClientSide(b *testing.B) {
	ctx := context.Background()
	var db fencedpg.DBTX = &recorder{}
	const hand = `UPDATE "accounts" SET "max_seen_token" = $2, "amount" = $3 WHERE "id" = $1 AND "max_seen_token" <= $2`
	set := map[string]any{"amount": int64(5)}
	sideBySide(b, func(i int64) error {
		_, err := db.Exec(ctx, hand, any(int64(1)), i, set["amount"])
		return err
	}, func(i int64) error {
		return fencedpg.Update(ctx, db, accounts, int64(1), fenced.Token(i), set)
	})
}
