package idempotencydynamo_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencydynamo"
	"github.com/concurkit/concurkit/testkit"
)

// dropper loses the answer of the first UpdateItem whose update expression
// contains mark, after DynamoDB applied it: the SDK sees a connection
// error and its default retryer sends the request again, as it does when
// a response is lost on the network.
type dropper struct {
	mu      sync.Mutex
	mark    string
	dropped bool
	sent    int // UpdateItems carrying mark, retries included
}

type markKey struct{}

func (d *dropper) options(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		err := st.Initialize.Add(middleware.InitializeMiddlewareFunc("mark", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if u, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok && u.UpdateExpression != nil && strings.Contains(*u.UpdateExpression, d.mark) {
				ctx = middleware.WithStackValue(ctx, markKey{}, true)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
		if err != nil {
			return err
		}
		// The deserialize step runs below the retry loop (finalize), once
		// per attempt.
		return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("drop", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if middleware.GetStackValue(ctx, markKey{}) == nil {
				return out, md, err
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			d.sent++
			if !d.dropped && err == nil {
				d.dropped = true
				return out, md, &smithyhttp.RequestSendError{Err: errors.New("test: connection reset after the request was applied")}
			}
			return out, md, err
		}), middleware.Before)
	})
}

// dropClient is a Client whose calls go through d.
type dropClient struct {
	*dynamodb.Client
	d *dropper
}

func (c dropClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return c.Client.UpdateItem(ctx, in, append(opts, c.d.options)...)
}

// TestSDKRetriedWrites: DynamoDB applied Complete (or Release) but its
// answer was lost; the SDK's default retryer (3 attempts) sent it again,
// and the retry's condition (the key held by this lock) failed because
// the first attempt had already completed (released) the key. That is
// this call's own write, not a lost lock: Do returns fn's value, and the
// key replays it.
func TestSDKRetriedWrites(t *testing.T) {
	ctx := t.Context()
	_, prefix := testkit.DynamoDB(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	client := dynamodb.New(dynamodb.Options{ // the SDK's default retryer
		BaseEndpoint: aws.String(testkit.DynamoDBEndpoint(t)),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("x", "x", ""),
		HTTPClient:   &http.Client{Transport: tr},
	})
	table := prefix + "keys"
	if err := idempotencydynamo.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, mark string
		fail       bool
	}{
		{"Complete", ":completed", false},
		{"Release", ":released", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &dropper{mark: c.mark}
			s, err := idempotencydynamo.New(dropClient{client, d}, &idempotencydynamo.Config{Table: idempotency.Table{Name: table}})
			if err != nil {
				t.Fatal(err)
			}
			errDeclined := errors.New("declined")
			runs := 0
			fn := func(context.Context) (int, error) {
				runs++
				if c.fail && runs == 1 {
					return 0, errDeclined
				}
				return 42, nil
			}
			v, replayed, err := idempotency.Do(ctx, s, "", c.name, nil, nil, fn)
			if c.fail {
				if !errors.Is(err, errDeclined) {
					t.Fatalf("first run: %v %v %v, want fn's error", v, replayed, err)
				}
				// The release was applied: the retry runs fn again.
				v, replayed, err = idempotency.Do(ctx, s, "", c.name, nil, nil, fn)
			}
			if err != nil || replayed || v != 42 {
				t.Fatalf("Do: %v replayed=%v %v, want 42", v, replayed, err)
			}
			if d.sent != 2 || !d.dropped {
				t.Fatalf("the %s was sent %d times (dropped %v): the SDK did not retry it", c.name, d.sent, d.dropped)
			}
			v, replayed, err = idempotency.Do(ctx, s, "", c.name, nil, nil, fn)
			if err != nil || !replayed || v != 42 || runs != 1+btoi(c.fail) {
				t.Fatalf("replay: %v replayed=%v %v (runs %d)", v, replayed, err, runs)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
