package fenced_test

import (
	"context"
	"testing"

	"github.com/concurkit/concurkit/fenced"
)

// BenchmarkWrite compares a guarded write with the plain upsert it
// replaces, on one hot row, one client, so the guard's cost is visible.
func BenchmarkWrite(b *testing.B) {
	ctx := context.Background()
	pg := pgPool(b)
	if _, err := pg.Exec(ctx, pgAccounts); err != nil {
		b.Fatal(err)
	}
	my := myDB(b)
	if _, err := my.ExecContext(ctx, myAccounts); err != nil {
		b.Fatal(err)
	}
	b.Run("postgres/fenced", func(b *testing.B) {
		tok := fenced.Token(1)
		for b.Loop() {
			tok++
			if err := fenced.WritePostgres(ctx, pg, accounts, 1, tok, fenced.Set{Column: "amount", Value: int64(tok)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("postgres/plain", func(b *testing.B) {
		n := 0
		for b.Loop() {
			n++
			if _, err := pg.Exec(ctx, `INSERT INTO accounts (id, amount) VALUES (2, $1) ON CONFLICT (id) DO UPDATE SET amount = EXCLUDED.amount`, n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mariadb/fenced", func(b *testing.B) {
		tok := fenced.Token(1)
		for b.Loop() {
			tok++
			if err := fenced.WriteMySQL(ctx, my, accounts, 1, tok, fenced.Set{Column: "amount", Value: int64(tok)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mariadb/plain", func(b *testing.B) {
		n := 0
		for b.Loop() {
			n++
			if _, err := my.ExecContext(ctx, "INSERT INTO accounts (id, amount) VALUES (2, ?) ON DUPLICATE KEY UPDATE amount = VALUES(amount)", n); err != nil {
				b.Fatal(err)
			}
		}
	})
}
