package fencedmysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
)

// sideBySide runs hand and lib, one call each per iteration in
// alternating order, so both see the same server and machine load, and
// reports the time of each per call and their ratio (lib/hand).
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
// fencedmysql.Update (one hot row each, one client).
func BenchmarkUpdate(b *testing.B) {
	ctx := context.Background()
	my := myDB(b)
	if _, err := my.ExecContext(ctx, myAccounts); err != nil {
		b.Fatal(err)
	}
	if _, err := my.ExecContext(ctx, "INSERT INTO accounts (id) VALUES (1), (2)"); err != nil {
		b.Fatal(err)
	}
	sideBySide(b, func(i int64) error {
		_, err := my.ExecContext(ctx, "UPDATE accounts SET amount = ?, max_seen_token = ? WHERE id = ? AND max_seen_token <= ?", i, i, 2, i)
		return err
	}, func(i int64) error {
		return fencedmysql.Update(ctx, my, accounts, 1, fenced.Token(i), map[string]any{"amount": i})
	})
}

// BenchmarkWrite: the plain upsert a guarded write replaces against
// fencedmysql.Write.
func BenchmarkWrite(b *testing.B) {
	ctx := context.Background()
	my := myDB(b)
	if _, err := my.ExecContext(ctx, myAccounts); err != nil {
		b.Fatal(err)
	}
	sideBySide(b, func(i int64) error {
		_, err := my.ExecContext(ctx, "INSERT INTO accounts (id, amount) VALUES (2, ?) ON DUPLICATE KEY UPDATE amount = VALUES(amount)", i)
		return err
	}, func(i int64) error {
		return fencedmysql.Write(ctx, my, accounts, 1, fenced.Token(i+1), map[string]any{"amount": i})
	})
}
