package fencedpg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

// TestNilHandles: every exported entry point that takes a handle refuses a
// nil one — untyped, or a typed nil pointer inside the interface, which
// used to get past a plain == nil and panic in the driver — with an error
// matching concurkit.ErrInvalidArgument, before any I/O.
func TestNilHandles(t *testing.T) {
	ctx := context.Background()
	var (
		pool *pgxpool.Pool
		conn *pgx.Conn
	)
	g := fenced.Table{Name: "t"}
	calls := func(h fencedpg.DBTX) map[string]func() error {
		return map[string]func() error{
			"Write":          func() error { return fencedpg.Write(ctx, h, g, 1, 1, nil) },
			"Update":         func() error { return fencedpg.Update(ctx, h, g, 1, 1, nil) },
			"Admit":          func() error { return fencedpg.Admit(ctx, h, fenced.Fence{}, "r", 1) },
			"CreateSequence": func() error { return fencedpg.CreateSequence(ctx, h) },
			"NewSequence":    func() error { _, err := fencedpg.NewSequence(h); return err },
		}
	}
	var nilSeq *fencedpg.Sequence
	for handle, calls := range map[string]map[string]func() error{
		"nil DBTX":                calls(nil),
		"typed nil *pgxpool.Pool": calls(pool),
		"typed nil *pgx.Conn":     calls(conn),
		"nil *Sequence":           {"Next": func() error { _, err := nilSeq.Next(ctx); return err }},
	} {
		for name, run := range calls {
			t.Run(handle+"/"+name, func(t *testing.T) {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				if err := run(); !errors.Is(err, concurkit.ErrInvalidArgument) {
					t.Fatalf("err = %v; want concurkit.ErrInvalidArgument", err)
				}
			})
		}
	}
}
