package idempotencydynamo_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencydynamo"
	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
	"github.com/concurkit/concurkit/testkit"
)

// newEnv returns a store on a fresh table of DynamoDB Local; the
// handlers' counter is in PostgreSQL.
func newEnv(t *testing.T) idemtest.Env {
	t.Helper()
	client, prefix := testkit.DynamoDB(t)
	table := prefix + "keys"
	if err := idempotencydynamo.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	s, err := idempotencydynamo.New(client, &idempotencydynamo.Config{Table: idempotency.Table{Name: table}})
	if err != nil {
		t.Fatal(err)
	}
	return idemtest.Env{Store: s, Counter: idemtest.PGCounter(t, testkit.Postgres(t)), Rows: func(ctx context.Context) (int, error) {
		out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), Select: types.SelectCount, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return 0, err
		}
		return int(out.Count), nil
	}}
}

func TestSuite(t *testing.T) { idemtest.Run(t, newEnv) }
