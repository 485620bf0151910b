package upsert_test

import (
	"fmt"
	"testing"
)

// BenchmarkInsertOrGet measures one InsertOrGet per op: path "new" inserts
// a fresh key every time, path "existing" hits the same existing key.
func BenchmarkInsertOrGet(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			ctx := b.Context()
			b.Run("new", func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					if _, created, err := s.insertOrGet(ctx, profile{int64(1_000_000 + i), "n", 0}); err != nil || !created {
						b.Fatal(created, err)
					}
				}
			})
			b.Run("existing", func(b *testing.B) {
				if _, _, err := s.insertOrGet(ctx, profile{1, "e", 0}); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, created, err := s.insertOrGet(ctx, profile{1, "e", 0}); err != nil || created {
						b.Fatal(created, err)
					}
				}
			})
		})
	}
}

// BenchmarkUpsert measures the update path of Upsert on one key.
func BenchmarkUpsert(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			ctx := b.Context()
			for i := 0; b.Loop(); i++ {
				if _, _, err := s.upsert(ctx, profile{1, fmt.Sprint(i), int64(i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
