package testenv

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

var dynamoServer = &server{
	name:   "DynamoDB Local",
	envVar: "CONCURKIT_DYNAMODB_ENDPOINT",
	def:    "http://127.0.0.1:18000",
	addrs:  hostPorts,
}

// DynamoDBEndpoint returns the URL of the DynamoDB endpoint.
func DynamoDBEndpoint(t testing.TB) string {
	t.Helper()
	return dynamoServer.get(t)
}

// DynamoDB returns a client of DynamoDB Local (region us-east-1, static
// credentials, RetryMaxAttempts 1) and a fresh table-name prefix
// "ck_<random>_". Tables whose names start with the prefix are deleted at
// cleanup.
func DynamoDB(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	c := DynamoDBClient(t, DynamoDBEndpoint(t))
	prefix := Name("ck_") + "_"
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := deleteDynamoTables(ctx, c, prefix); err != nil {
			t.Logf("testenv: delete dynamodb tables %s*: %v", prefix, err)
		}
	})
	return c, prefix
}

// DynamoDBClient returns a client for endpoint, built as SERVICES.md says:
// region us-east-1, static credentials "x"/"x", RetryMaxAttempts 1. Its HTTP
// transport keeps up to 100 idle connections, closed at cleanup.
func DynamoDBClient(t testing.TB, endpoint string) *dynamodb.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 100, 100
	t.Cleanup(tr.CloseIdleConnections)
	return dynamodb.New(dynamodb.Options{
		BaseEndpoint:     aws.String(endpoint),
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("x", "x", ""),
		RetryMaxAttempts: 1,
		HTTPClient:       &http.Client{Transport: tr},
	})
}

func deleteDynamoTables(ctx context.Context, c *dynamodb.Client, prefix string) error {
	var names []string
	p := dynamodb.NewListTablesPaginator(c, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, n := range out.TableNames {
			if strings.HasPrefix(n, prefix) {
				names = append(names, n)
			}
		}
	}
	var errs []error
	for _, n := range names {
		_, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(n)})
		var nf *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
