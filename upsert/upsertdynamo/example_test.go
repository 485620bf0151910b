package upsertdynamo_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/upsertdynamo"
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

// exampleDynamoDB creates a uniquely named table keyed by the string
// attribute email and returns a function that deletes it.
func exampleDynamoDB(ctx context.Context) (*dynamodb.Client, string, func(), error) {
	client := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(exampleEnv("CONCURKIT_DYNAMODB_ENDPOINT", "http://127.0.0.1:18000")),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("x", "x", ""),
	})
	b := make([]byte, 6)
	rand.Read(b)
	name := "example-accounts-" + hex.EncodeToString(b)
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("email"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("email"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return nil, "", nil, err
	}
	drop := func() {
		client.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	}
	return client, name, drop, nil
}

func ExampleInsert() {
	ctx := context.Background()
	client, table, drop, err := exampleDynamoDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()

	t := upsert.Table{Name: table, KeyColumn: "email"}
	created, err := upsertdynamo.Insert(ctx, client, t, map[string]any{"email": "ada@example.com", "name": "Ada"})
	fmt.Println(created, err)
	created, err = upsertdynamo.Insert(ctx, client, t, map[string]any{"email": "ada@example.com", "name": "Impostor"})
	fmt.Println(created, err)
	// Output:
	// true <nil>
	// false <nil>
}

func ExampleUpsert() {
	ctx := context.Background()
	client, table, drop, err := exampleDynamoDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()

	t := upsert.Table{Name: table, KeyColumn: "email"}
	for _, p := range []string{"free", "pro"} {
		item, created, err := upsertdynamo.Upsert(ctx, client, t, map[string]any{"email": "ada@example.com", "name": "Ada", "plan": p})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(created, item["plan"].(*types.AttributeValueMemberS).Value)
	}
	// Output:
	// true free
	// false pro
}

func ExampleInsertOrGet() {
	ctx := context.Background()
	client, table, drop, err := exampleDynamoDB(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()

	t := upsert.Table{Name: table, KeyColumn: "email"}
	for _, n := range []string{"Ada", "Impostor"} {
		item, created, err := upsertdynamo.InsertOrGet(ctx, client, t, map[string]any{"email": "ada@example.com", "name": n})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(created, item["name"].(*types.AttributeValueMemberS).Value)
	}
	// Output:
	// true Ada
	// false Ada
}
