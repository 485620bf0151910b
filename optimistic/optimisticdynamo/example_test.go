package optimisticdynamo_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticdynamo"
)

// The examples connect to the servers of scripts/services.sh (or the
// CONCURKIT_* variables) and work on session-private temporary tables, or a
// uniquely named DynamoDB table, so they can run next to the tests.

func exampleEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// exampleDynamoDB creates a uniquely named table with item id=1
// (stock 10, version 1) and returns a function that deletes it.
func exampleDynamoDB(ctx context.Context) (*dynamodb.Client, string, func(), error) {
	client := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(exampleEnv("CONCURKIT_DYNAMODB_ENDPOINT", "http://127.0.0.1:18000")),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("x", "x", ""),
	})
	b := make([]byte, 6)
	rand.Read(b)
	name := "example-inventory-" + hex.EncodeToString(b)
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeN}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return nil, "", nil, err
	}
	drop := func() {
		client.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	}
	_, err = client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberN{Value: "1"}, "stock": &types.AttributeValueMemberN{Value: "10"}, "version": &types.AttributeValueMemberN{Value: "1"},
	}})
	if err != nil {
		drop()
		return nil, "", nil, err
	}
	return client, name, drop, nil
}

func ExampleUpdate() {
	ctx := context.Background()
	client, table, drop, err := exampleDynamoDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()

	inventory := optimistic.Table{Name: table, KeyColumn: "id", VersionColumn: "version"}
	v, err := optimisticdynamo.Update(ctx, client, inventory, 1, 1, map[string]any{"stock": 9})
	fmt.Println(v, err)
	_, err = optimisticdynamo.Update(ctx, client, inventory, 1, 1, map[string]any{"stock": 8})
	fmt.Println(errors.Is(err, optimistic.ErrConflict))
	_, err = optimisticdynamo.Update(ctx, client, inventory, 2, 1, map[string]any{"stock": 8})
	fmt.Println(errors.Is(err, optimistic.ErrNotFound))
	// Output:
	// 2 <nil>
	// true
	// true
}
