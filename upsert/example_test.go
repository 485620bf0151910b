package upsert_test

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/upsertpg"
)

// Example records a payment once per idempotency key: a retried request
// with the same key gets the stored result instead of paying twice. The
// core package holds the Table; the adapter (here upsertpg; upsertmysql
// and upsertdynamo have the same functions) does the work. It connects to
// the PostgreSQL of scripts/services.sh (or CONCURKIT_POSTGRES_URL) and
// uses a session-private temporary table.
func Example() {
	ctx := context.Background()
	url := os.Getenv("CONCURKIT_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TEMPORARY TABLE payments (idempotency_key text PRIMARY KEY, amount bigint NOT NULL)`); err != nil {
		fmt.Println(err)
		return
	}

	payments := upsert.Table{Name: "payments", KeyColumn: "idempotency_key"}
	for _, amount := range []int64{100, 999} { // the retry carries a different body
		var stored int64
		created, err := upsertpg.InsertOrGet(ctx, conn, payments,
			map[string]any{"idempotency_key": "req-42", "amount": amount},
			[]string{"amount"}, &stored)
		fmt.Println(created, stored, err)
	}
	// Output:
	// true 100 <nil>
	// false 100 <nil>
}
