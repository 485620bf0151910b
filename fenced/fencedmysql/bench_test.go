package fencedmysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
)

// sideBySide runs hand and lib alternately, one call each per iteration,
// so both see the same server and machine load, and reports the time of
// each per call and their ratio (lib/hand).
func sideBySide(b *testing.B, hand, lib func(i int64) error) {
	var handT, libT time.Duration
	var i int64
	for b.Loop() {
		i++
		t0 := time.Now()
		if err := hand(i); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := lib(i); err != nil {
			b.Fatal(err)
		}
		handT += t1.Sub(t0)
		libT += time.Since(t1)
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
