package dynamolock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/dynamolock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fenceddynamo"
)

// exampleClient builds a client of the test DynamoDB Local; close releases
// its idle connections.
func exampleClient() (c *dynamodb.Client, close func()) {
	endpoint := os.Getenv("CONCURKIT_DYNAMODB_ENDPOINT")
	if endpoint == "" {
		endpoint = "http://127.0.0.1:18000"
	}
	tr := &http.Transport{}
	return dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(endpoint), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("x", "x", ""),
		HTTPClient:  &http.Client{Transport: tr},
	}), tr.CloseIdleConnections
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// Five instances of a payment service race to charge order 42. The lease
// item serialises them; the order item is written with the lease's
// fencing token (ConditionExpression on max_seen_token), so an instance
// that was paused past its lease can never write after its successor.
func Example() {
	ctx := context.Background()
	c, closeIdle := exampleClient()
	defer closeIdle()
	prefix := fmt.Sprintf("example%d_", rand.Uint32())
	locks, orders := prefix+"locks", prefix+"orders"
	if err := dynamolock.CreateTable(ctx, c, locks, ""); err != nil {
		fmt.Println(err) // e.g. no server: print, do not end the test binary
		return
	}
	defer c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(locks)})
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(orders),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		fmt.Println(err)
		return
	}
	defer c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(orders)})
	order := map[string]types.AttributeValue{"id": s("42")}
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(orders), Item: map[string]types.AttributeValue{"id": s("42"), "status": s("pending")}}); err != nil {
		fmt.Println(err)
		return
	}

	var charged atomic.Int32
	var wg sync.WaitGroup
	for instance := range 5 {
		wg.Go(func() {
			client, closeIdle := exampleClient() // each instance: its own client
			defer closeIdle()
			locker, err := dynamolock.New(client, &dynamolock.Config{Table: locks})
			if err != nil {
				fmt.Println(err)
				return
			}
			lease, err := locker.Acquire(ctx, "order-42", &distlock.Options{TTL: 10 * time.Second})
			if err != nil {
				fmt.Println(err)
				return
			}
			defer lease.Release(ctx)
			got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(orders), Key: order, ConsistentRead: aws.Bool(true)})
			if err != nil {
				fmt.Println(err)
				return
			}
			if got.Item["status"].(*types.AttributeValueMemberS).Value != "pending" {
				return // already charged by an earlier holder
			}
			// charge the card here, then record it, fenced:
			err = fenceddynamo.Put(ctx, client, fenced.Table{Name: orders},
				map[string]types.AttributeValue{"id": s("42"), "status": s("charged"), "by": s(fmt.Sprint(instance))}, lease.Token())
			if errors.Is(err, fenced.ErrStaleToken) {
				return // our lease was taken over: the successor decides
			}
			if err != nil {
				fmt.Println(err)
				return
			}
			charged.Add(1)
		})
	}
	wg.Wait()
	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(orders), Key: order, ConsistentRead: aws.Bool(true)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("instances that charged:", charged.Load())
	fmt.Println("order:", got.Item["status"].(*types.AttributeValueMemberS).Value)
	// Output:
	// instances that charged: 1
	// order: charged
}

// TryAcquire fails at once while another instance holds the key; each
// acquisition gets a higher fencing token from the lock item's counter.
func ExampleLocker_TryAcquire() {
	ctx := context.Background()
	c, closeIdle := exampleClient()
	defer closeIdle()
	table := fmt.Sprintf("example%d_locks", rand.Uint32())
	if err := dynamolock.CreateTable(ctx, c, table, ""); err != nil {
		fmt.Println(err)
		return
	}
	defer c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	locker, err := dynamolock.New(c, &dynamolock.Config{Table: table})
	if err != nil {
		fmt.Println(err)
		return
	}
	first, err := locker.TryAcquire(ctx, "report", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryAcquire(ctx, "report", nil)
	fmt.Println(errors.Is(err, distlock.ErrNotAcquired))
	_ = first.Release(ctx)
	second, err := locker.TryAcquire(ctx, "report", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Release(ctx)
	fmt.Println(first.Token(), second.Token())
	// Output:
	// true
	// 1 2
}

// Close at shutdown: it releases the leases still held and waits for the
// Locker's background cleanups (an acquisition abandoned while its request
// was in flight is undone), so the process can exit without leaving locks
// behind until their lease runs out.
func ExampleLocker_Close() {
	ctx := context.Background()
	c, closeIdle := exampleClient()
	defer closeIdle()
	table := fmt.Sprintf("example%d_locks", rand.Uint32())
	if err := dynamolock.CreateTable(ctx, c, table, ""); err != nil {
		fmt.Println(err)
		return
	}
	defer c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	locker, err := dynamolock.New(c, &dynamolock.Config{Table: table})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := locker.Acquire(ctx, "report", nil); err != nil {
		fmt.Println(err)
		return
	}
	shutdown, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fmt.Println("close:", locker.Close(shutdown))
	_, err = locker.TryAcquire(ctx, "report", nil)
	fmt.Println("after close:", errors.Is(err, distlock.ErrClosed))
	other, err := dynamolock.New(c, &dynamolock.Config{Table: table})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer other.Close(ctx)
	lease, err := other.TryAcquire(ctx, "report", nil)
	fmt.Println("key free:", err == nil)
	if err == nil {
		_ = lease.Release(ctx)
	}
	// Output:
	// close: <nil>
	// after close: true
	// key free: true
}
