package idempotencydynamo_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencydynamo"
)

// exampleClient returns a client of DynamoDB Local (scripts/services.sh or
// CONCURKIT_DYNAMODB_ENDPOINT), a table name of its own and a function
// that deletes the table. The examples print errors instead of log.Fatal.
func exampleClient(ctx context.Context) (*dynamodb.Client, string, func()) {
	endpoint := os.Getenv("CONCURKIT_DYNAMODB_ENDPOINT")
	if endpoint == "" {
		endpoint = "http://127.0.0.1:18000"
	}
	c := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(endpoint), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("x", "x", ""), RetryMaxAttempts: 1,
	})
	table := "ck_example_idem_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	return c, table, func() {
		_, _ = c.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	}
}

func ExampleCreateTable() {
	ctx := context.Background()
	client, table, drop := exampleClient(ctx)
	defer drop()
	if err := idempotencydynamo.CreateTable(ctx, client, table); err != nil {
		fmt.Println(err)
		return
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(*ttl.TimeToLiveDescription.AttributeName, ttl.TimeToLiveDescription.TimeToLiveStatus)
	// Output: expiration ENABLED
}

func ExampleNew() {
	ctx := context.Background()
	client, table, drop := exampleClient(ctx)
	defer drop()
	if err := idempotencydynamo.CreateTable(ctx, client, table); err != nil {
		fmt.Println(err)
		return
	}
	store, err := idempotencydynamo.New(client, &idempotencydynamo.Config{Table: idempotency.Table{Name: table}})
	if err != nil {
		fmt.Println(err)
		return
	}
	send := func(context.Context) (string, error) { return "mail sent", nil }
	for range 2 {
		v, replayed, err := idempotency.Do(ctx, store, "tenant-1", "welcome-mail:user-9", nil, nil, send)
		fmt.Println(v, replayed, err)
	}
	// Output:
	// mail sent false <nil>
	// mail sent true <nil>
}
