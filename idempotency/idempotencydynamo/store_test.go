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
	return envOn(t, client, prefix+"keys")
}

// envOn creates table and returns the Env of a store on it through client.
func envOn(t *testing.T, client *dynamodb.Client, table string) idemtest.Env {
	t.Helper()
	if err := idempotencydynamo.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	s, err := idempotencydynamo.New(client, &idempotencydynamo.Config{Table: idempotency.Table{Name: table}})
	if err != nil {
		t.Fatal(err)
	}
	count := func(filter string) func(ctx context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			in := &dynamodb.ScanInput{TableName: aws.String(table), Select: types.SelectCount, ConsistentRead: aws.Bool(true)}
			if filter != "" {
				in.FilterExpression = aws.String(filter)
				in.ExpressionAttributeNames = map[string]string{"#status": "status"}
				in.ExpressionAttributeValues = map[string]types.AttributeValue{":inprogress": &types.AttributeValueMemberS{Value: "INPROGRESS"}}
			}
			n := 0
			for p := dynamodb.NewScanPaginator(client, in); p.HasMorePages(); {
				out, err := p.NextPage(ctx)
				if err != nil {
					return n, err
				}
				n += int(out.Count)
			}
			return n, nil
		}
	}
	return idemtest.Env{Store: s, Counter: idemtest.PGCounter(t, testkit.Postgres(t)), Rows: count(""), Locked: count("#status = :inprogress")}
}

// storeLimit is a response DynamoDB cannot keep: an item is at most
// 400 KB.
const storeLimit = 400 << 10

func TestSuite(t *testing.T) { idemtest.Run(t, newEnv, storeLimit) }
