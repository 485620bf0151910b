package fenceddynamo_test

import (
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/fenced/fenceddynamo"
	"github.com/concurkit/concurkit/testkit"
)

// env reads a variable for the Examples, which cannot use testkit.
func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func ddb(t testing.TB) (*dynamodb.Client, string) { return testkit.DynamoDB(t) }

func createTable(t testing.TB, c *dynamodb.Client, table, key string) {
	t.Helper()
	ctx := context.Background()
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("create DynamoDB table %s: %v", table, err) // the endpoint came from testkit: a failure here is real
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
}

func createCounterTable(t testing.TB, c *dynamodb.Client, table string) {
	createTable(t, c, table, fenceddynamo.DefaultCounterKey)
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
