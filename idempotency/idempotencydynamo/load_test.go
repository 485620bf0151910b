package idempotencydynamo_test

import (
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
	"github.com/concurkit/concurkit/testkit"
)

// TestLoad runs the exactly-once load test (idemtest.Load: 5 % of the
// clients give up at random points, duplicates and retries) for
// -idem.duration, 3 s by default, through a client with the SDK's default
// retryer, as users have it: a retried claim or completion that DynamoDB
// had applied must not show.
func TestLoad(t *testing.T) {
	_, prefix := testkit.DynamoDB(t) // the table prefix, deleted at cleanup
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 100
	t.Cleanup(tr.CloseIdleConnections)
	client := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(testkit.DynamoDBEndpoint(t)),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("x", "x", ""),
		HTTPClient:   &http.Client{Transport: tr},
	})
	idemtest.Load(t, envOn(t, client, prefix+"load"), idemtest.LoadConfig{})
}
