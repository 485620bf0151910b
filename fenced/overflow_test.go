package fenced_test

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/fenced"
)

// TestSourcesAtTheirLimit: each Source mints its largest token, then
// refuses with ErrTokenOverflow (an ErrInvalidToken) instead of handing
// out something that is not a valid Token. DynamoDB numbers have 38
// digits, so the counter itself goes past math.MaxInt64; Go used to fail
// with a bare strconv range error there.
func TestSourcesAtTheirLimit(t *testing.T) {
	ctx := t.Context()
	pg := pgPool(t)
	my := myDB(t)
	if err := fenced.CreatePostgresSequence(ctx, pg); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Exec(ctx, "SELECT setval('concurkit_fence_token_seq', 9223372036854775806)"); err != nil {
		t.Fatal(err)
	}
	pgSrc, err := fenced.NewPostgresSequence(pg)
	if err != nil {
		t.Fatal(err)
	}
	if err := fenced.CreateMySQLSequence(ctx, my); err != nil {
		t.Fatal(err)
	}
	// A signed MariaDB SEQUENCE stops at its default MAXVALUE,
	// math.MaxInt64-1.
	if _, err := my.ExecContext(ctx, "SELECT SETVAL(concurkit_fence_token_seq, 9223372036854775805)"); err != nil {
		t.Fatal(err)
	}
	mySrc, err := fenced.NewMySQLSequence(my)
	if err != nil {
		t.Fatal(err)
	}
	client, prefix := ddb(t)
	table := prefix + "counters"
	createCounterTable(t, client, table)
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			fenced.DefaultCounterKey:   s("tokens"),
			fenced.DefaultCounterValue: &types.AttributeValueMemberN{Value: strconv.FormatInt(math.MaxInt64-1, 10)},
		},
	}); err != nil {
		t.Fatal(err)
	}
	ddbSrc, err := fenced.NewDynamoDBCounter(client, table, "tokens", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		src  fenced.Source
		last fenced.Token
	}{
		{"postgres", pgSrc, math.MaxInt64},
		{"mariadb", mySrc, math.MaxInt64 - 1},
		{"dynamodb", ddbSrc, math.MaxInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			if tok, err := c.src.Next(ctx); err != nil || tok != c.last {
				t.Fatalf("last token = %d, %v; want %d", tok, err, c.last)
			}
			for range 2 {
				tok, err := c.src.Next(ctx)
				if !errors.Is(err, fenced.ErrTokenOverflow) || !errors.Is(err, fenced.ErrInvalidToken) || tok != 0 {
					t.Fatalf("past the limit: %d, %v; want ErrTokenOverflow", tok, err)
				}
			}
		})
	}
}
