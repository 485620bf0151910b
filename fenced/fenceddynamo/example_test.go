package fenceddynamo_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fenceddynamo"
)

// The examples connect to DynamoDB Local of scripts/services.sh (or
// CONCURKIT_DYNAMODB_ENDPOINT) and work in a table they delete. A missing
// server fails the example, never the test binary.
func exampleDynamoDB(ctx context.Context, key string) (*dynamodb.Client, string, func(), error) {
	tr := &http.Transport{}
	c := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(env("CONCURKIT_DYNAMODB_ENDPOINT", "http://127.0.0.1:18000")),
		Region:       "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("x", "x", ""),
		HTTPClient: &http.Client{Transport: tr},
	})
	table := fmt.Sprintf("example%d", rand.Uint32())
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, "", nil, err
	}
	return c, table, func() {
		_, _ = c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		tr.CloseIdleConnections()
	}, nil
}

func ExamplePut() {
	ctx := context.Background()
	c, table, cleanup, err := exampleDynamoDB(ctx, "id")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	orders := fenced.Table{Name: table} // token attribute "max_seen_token"
	item := func(state string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "order-1"}, "state": &types.AttributeValueMemberS{Value: state}}
	}
	fmt.Println(fenceddynamo.Put(ctx, c, orders, item("charged by B"), 8))
	err = fenceddynamo.Put(ctx, c, orders, item("charged by A"), 7)
	fmt.Println(errors.Is(err, fenced.ErrStaleToken))
	// Output:
	// <nil>
	// true
}

// With VersionColumn the fenced write also ADDs 1 to the item's version,
// so optimistic writers that compare the version see it.
func ExamplePut_versioned() {
	ctx := context.Background()
	c, table, cleanup, err := exampleDynamoDB(ctx, "id")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	accounts := fenced.Table{Name: table, KeyColumn: "id", VersionColumn: "version"}
	item := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "acct-1"}, "balance": &types.AttributeValueMemberN{Value: "100"}}
	fmt.Println(fenceddynamo.Put(ctx, c, accounts, item, 3))
	fmt.Println(fenceddynamo.Put(ctx, c, accounts, item, 3))
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"id": item["id"]}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("version", out.Item["version"].(*types.AttributeValueMemberN).Value)
	// Output:
	// <nil>
	// <nil>
	// version 2
}

func ExampleNewCounter() {
	ctx := context.Background()
	c, table, cleanup, err := exampleDynamoDB(ctx, fenceddynamo.DefaultCounterKey)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	src, err := fenceddynamo.NewCounter(c, table, "lock-tokens", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	a, _ := src.Next(ctx)
	b, _ := src.Next(ctx)
	fmt.Println(a, b)
	// Output: 1 2
}
