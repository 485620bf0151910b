package fencedmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
)

// TestNilHandles: every exported entry point that takes a handle refuses a
// nil one — untyped, or a typed nil pointer inside the interface, which
// used to get past a plain == nil and panic in the driver — with an error
// matching concurkit.ErrInvalidArgument, before any I/O.
func TestNilHandles(t *testing.T) {
	ctx := context.Background()
	var (
		db   *sql.DB
		conn *sql.Conn
		tx   *sql.Tx
	)
	g := fenced.Table{Name: "t"}
	calls := func(h fencedmysql.DBTX) map[string]func() error {
		return map[string]func() error{
			"Write":          func() error { return fencedmysql.Write(ctx, h, g, 1, 1, nil) },
			"Update":         func() error { return fencedmysql.Update(ctx, h, g, 1, 1, nil) },
			"Admit":          func() error { return fencedmysql.Admit(ctx, h, fenced.Fence{}, "r", 1) },
			"CreateSequence": func() error { return fencedmysql.CreateSequence(ctx, h) },
			"NewSequence":    func() error { _, err := fencedmysql.NewSequence(h); return err },
		}
	}
	var nilSeq *fencedmysql.Sequence
	for handle, calls := range map[string]map[string]func() error{
		"nil DBTX":            calls(nil),
		"typed nil *sql.DB":   calls(db),
		"typed nil *sql.Conn": calls(conn),
		"typed nil *sql.Tx":   calls(tx),
		"nil *Sequence":       {"Next": func() error { _, err := nilSeq.Next(ctx); return err }},
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
