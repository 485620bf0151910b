package fenced_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit/fenced"
)

// TestNilHandles: every exported entry point that takes a handle refuses a
// nil one — untyped, or a typed nil pointer inside the interface, which
// used to get past a plain == nil and panic in the driver — with
// ErrNilHandle, before any I/O.
func TestNilHandles(t *testing.T) {
	ctx := context.Background()
	var (
		pool   *pgxpool.Pool
		db     *sql.DB
		conn   *sql.Conn
		tx     *sql.Tx
		client *dynamodb.Client
	)
	g := fenced.Guard{Table: "t"}
	var fence fenced.Fence
	type call struct {
		name string
		run  func() error
	}
	pg := func(h fenced.DBTX) []call {
		return []call{
			{"WritePostgres", func() error { return fenced.WritePostgres(ctx, h, g, 1, 1) }},
			{"UpdatePostgres", func() error { return fenced.UpdatePostgres(ctx, h, g, 1, 1) }},
			{"Admit", func() error { return fenced.Admit(ctx, h, "r", 1) }},
			{"Fence.Admit", func() error { return fence.Admit(ctx, h, "r", 1) }},
			{"CreatePostgresSequence", func() error { return fenced.CreatePostgresSequence(ctx, h) }},
			{"NewPostgresSequence", func() error { _, err := fenced.NewPostgresSequence(h); return err }},
		}
	}
	my := func(h fenced.SQLDBTX) []call {
		return []call{
			{"WriteMySQL", func() error { return fenced.WriteMySQL(ctx, h, g, 1, 1) }},
			{"UpdateMySQL", func() error { return fenced.UpdateMySQL(ctx, h, g, 1, 1) }},
			{"AdmitMySQL", func() error { return fenced.AdmitMySQL(ctx, h, "r", 1) }},
			{"Fence.AdmitMySQL", func() error { return fence.AdmitMySQL(ctx, h, "r", 1) }},
			{"CreateMySQLSequence", func() error { return fenced.CreateMySQLSequence(ctx, h) }},
			{"NewMySQLSequence", func() error { _, err := fenced.NewMySQLSequence(h); return err }},
		}
	}
	ddb := func(p fenced.DynamoDBPutter, u fenced.DynamoDBUpdater) []call {
		return []call{
			{"PutDynamoDB", func() error { return fenced.PutDynamoDB(ctx, p, g, nil, 1) }},
			{"NewDynamoDBCounter", func() error { _, err := fenced.NewDynamoDBCounter(u, "t", "n", nil); return err }},
		}
	}
	for _, h := range []struct {
		handle string
		calls  []call
	}{
		{"nil DBTX", pg(nil)},
		{"typed nil *pgxpool.Pool", pg(pool)},
		{"nil SQLDBTX", my(nil)},
		{"typed nil *sql.DB", my(db)},
		{"typed nil *sql.Conn", my(conn)},
		{"typed nil *sql.Tx", my(tx)},
		{"nil DynamoDB interfaces", ddb(nil, nil)},
		{"typed nil *dynamodb.Client", ddb(client, client)},
	} {
		for _, c := range h.calls {
			t.Run(h.handle+"/"+c.name, func(t *testing.T) {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				if err := c.run(); !errors.Is(err, fenced.ErrNilHandle) {
					t.Fatalf("err = %v; want ErrNilHandle", err)
				}
			})
		}
	}
}
