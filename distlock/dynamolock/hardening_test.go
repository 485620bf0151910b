package dynamolock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/dynamolock"
	"github.com/concurkit/concurkit/testkit"
)

// within runs fn and fails the test if it has not returned after d (fn
// keeps running: a hung call is reported, not waited for forever).
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s has not returned after %v", what, d)
	}
}

// counting counts the requests that reach the client.
type counting struct {
	dynamolock.Client
	n atomic.Int64
}

func (c *counting) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.n.Add(1)
	return c.Client.UpdateItem(ctx, in, opt...)
}

// failing answers every request with err.
type failing struct {
	err error
	n   atomic.Int64
}

func (f *failing) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.n.Add(1)
	return nil, f.err
}

// httpStatus is an SDK error carrying only an HTTP status (an API error
// whose code the SDK does not model).
func httpStatus(code int) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}},
			Err:      &smithy.GenericAPIError{Code: "Unmodeled" + strconv.Itoa(code), Message: "status " + strconv.Itoa(code)},
		},
	}}
}

// TestErrorClassification: a request DynamoDB refused (missing table,
// validation, access denied) ends Acquire at once with that error — even
// with context.Background — while throttling, server faults, timeouts and
// connection errors are retried until the context ends.
func TestErrorClassification(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"resource not found", &types.ResourceNotFoundException{Message: aws.String("no table")}, false},
		{"validation", &smithy.GenericAPIError{Code: "ValidationException", Message: "key too long", Fault: smithy.FaultClient}, false},
		{"access denied", &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "no", Fault: smithy.FaultClient}, false},
		{"unrecognized client", &smithy.GenericAPIError{Code: "UnrecognizedClientException", Message: "bad key"}, false},
		{"client-side validation", &smithy.OperationError{Err: &smithy.InvalidParamsError{Context: "UpdateItemInput"}}, false},
		{"throughput exceeded", &types.ProvisionedThroughputExceededException{}, true},
		{"throttling", &types.ThrottlingException{}, true},
		{"request limit", &types.RequestLimitExceeded{}, true},
		{"transaction conflict", &types.TransactionConflictException{}, true},
		{"internal server error", &types.InternalServerError{}, true},
		{"server fault", &smithy.GenericAPIError{Code: "ServiceUnavailable", Fault: smithy.FaultServer}, true},
		{"http 503", httpStatus(503), true},
		{"request timeout", &smithy.OperationError{Err: &smithy.CanceledError{Err: context.DeadlineExceeded}}, true},
		{"connection refused", &smithy.OperationError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &failing{err: tc.err}
			l, err := dynamolock.New(f, &dynamolock.Config{Table: "t"})
			t.Cleanup(func() { closeLocker(t, l) })
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tc.retry {
				c, cancel := context.WithCancel(ctx)
				defer cancel()
				go func() { // give up once the error was retried a few times
					for f.n.Load() < 3 && c.Err() == nil {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}()
				ctx = c
			}
			var aerr error
			// A short TTL: after a retryable failure the request may have
			// been applied, and the Locker undoes it until the lease it
			// wrote would have run out (Close waits for that).
			within(t, 10*time.Second, "Acquire", func() { _, aerr = l.Acquire(ctx, distlocktest.Key(t), &distlock.Options{TTL: time.Second}) })
			if tc.retry {
				if !errors.Is(aerr, distlock.ErrNotAcquired) || !errors.Is(aerr, context.Canceled) || f.n.Load() < 3 {
					t.Fatalf("Acquire = %v after %d requests, want retries until cancelled", aerr, f.n.Load())
				}
				return
			}
			if !errors.Is(aerr, tc.err) || errors.Is(aerr, distlock.ErrNotAcquired) || f.n.Load() != 1 {
				t.Fatalf("Acquire = %v after %d requests, want the cause at once", aerr, f.n.Load())
			}
			var terr error
			within(t, 10*time.Second, "TryAcquire", func() { _, terr = l.TryAcquire(context.Background(), distlocktest.Key(t), nil) })
			if !errors.Is(terr, tc.err) || errors.Is(terr, distlock.ErrNotAcquired) {
				t.Fatalf("TryAcquire = %v, want the cause", terr)
			}
		})
	}
}

// TestMissingTable: on a real server, Acquire with context.Background on a
// table that does not exist returns at once with the SDK's typed error.
func TestMissingTable(t *testing.T) {
	c, prefix := testkit.DynamoDB(t)
	l, err := dynamolock.New(c, &dynamolock.Config{Table: prefix + "missing"})
	t.Cleanup(func() { closeLocker(t, l) })
	if err != nil {
		t.Fatal(err)
	}
	var aerr error
	within(t, 10*time.Second, "Acquire on a missing table", func() { _, aerr = l.Acquire(context.Background(), distlocktest.Key(t), nil) })
	var nf *types.ResourceNotFoundException
	if !errors.As(aerr, &nf) || errors.Is(aerr, distlock.ErrNotAcquired) {
		t.Fatalf("Acquire = %v, want *types.ResourceNotFoundException", aerr)
	}
	_, terr := l.TryAcquire(t.Context(), distlocktest.Key(t), nil)
	if !errors.As(terr, &nf) {
		t.Fatalf("TryAcquire = %v, want *types.ResourceNotFoundException", terr)
	}
}

// TestInvalidKeys: keys DynamoDB cannot store as given are refused with
// ErrInvalidKey before any request — over MaxKeyBytes, or not valid UTF-8
// (which DynamoDB would turn into U+FFFD, so "\xff" and "\xfe" would be one
// lock). A key of exactly MaxKeyBytes works.
func TestInvalidKeys(t *testing.T) {
	name, _ := table(t)
	c := &counting{Client: testkit.DynamoDBClient(t, testkit.DynamoDBEndpoint(t))}
	l, err := dynamolock.New(c, &dynamolock.Config{Table: name})
	t.Cleanup(func() { closeLocker(t, l) })
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		strings.Repeat("k", 3000),
		strings.Repeat("é", dynamolock.MaxKeyBytes/2) + "x",
		"\xff", "\xfe", "lock-\xc3", "a\xed\xa0\x80b", // invalid UTF-8 (the last a surrogate)
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, aerr := l.Acquire(ctx, key, nil)
		_, terr := l.TryAcquire(ctx, key, nil)
		cancel()
		if !errors.Is(aerr, distlock.ErrInvalidKey) || !errors.Is(terr, distlock.ErrInvalidKey) {
			t.Fatalf("key of %d bytes (%.12q…): Acquire = %v, TryAcquire = %v, want ErrInvalidKey", len(key), key, aerr, terr)
		}
	}
	if n := c.n.Load(); n != 0 {
		t.Fatalf("%d requests sent for invalid keys", n)
	}
	longest := strings.Repeat("é", dynamolock.MaxKeyBytes/2)
	lz, err := l.TryAcquire(t.Context(), longest, nil)
	if err != nil {
		t.Fatalf("key of MaxKeyBytes: %v", err)
	}
	if err := lz.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestNilClient: a nil client, or an interface holding a nil
// *dynamodb.Client, is bad input reported by New and CreateTable, not a
// panic at the first request.
func TestNilClient(t *testing.T) {
	var c *dynamodb.Client
	for _, db := range []dynamolock.Client{nil, c} {
		if _, err := dynamolock.New(db, &dynamolock.Config{Table: "t"}); !errors.Is(err, concurkit.ErrInvalidArgument) || !strings.Contains(err.Error(), "dynamolock: nil client") {
			t.Fatalf("New(%#v) = %v, want an error matching concurkit.ErrInvalidArgument saying \"dynamolock: nil client\"", db, err)
		}
	}
	if err := dynamolock.CreateTable(t.Context(), c, "t", ""); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatalf("CreateTable(nil *Client) = %v", err)
	}
}

// item reads a lock item (consistent read).
func item(t *testing.T, c *dynamodb.Client, table, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{dynamolock.DefaultKeyColumn: &types.AttributeValueMemberS{Value: key}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func put(t *testing.T, c *dynamodb.Client, table, key string, attrs map[string]types.AttributeValue) {
	t.Helper()
	attrs[dynamolock.DefaultKeyColumn] = &types.AttributeValueMemberS{Value: key}
	if _, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: attrs}); err != nil {
		t.Fatal(err)
	}
}

func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// TestLeaseDurationEdges: the lease duration stored for waiters is the
// TTL rounded up to whole milliseconds (never 0 for a sub-millisecond TTL,
// never shorter than the holder's), and MaxInt64 nanoseconds fits.
func TestLeaseDurationEdges(t *testing.T) {
	name, newLocker := table(t)
	c, _ := testkit.DynamoDB(t)
	l := newLocker(t)
	for _, tc := range []struct {
		ttl  time.Duration
		want string
	}{
		{time.Nanosecond, "1"},
		{time.Millisecond - 1, "1"},
		{time.Millisecond, "1"},
		{time.Millisecond + 1, "2"},
		{1500 * time.Microsecond, "2"},
		{time.Duration(math.MaxInt64), "9223372036855"},
	} {
		key := distlocktest.Key(t) + tc.ttl.String()
		lz, err := l.TryAcquire(t.Context(), key, &distlock.Options{TTL: tc.ttl})
		if err != nil {
			t.Fatalf("TTL %v: %v", tc.ttl, err)
		}
		if got := item(t, c, name, key)[dynamolock.AttrLeaseMS].(*types.AttributeValueMemberN).Value; got != tc.want {
			t.Errorf("TTL %v: %s = %s, want %s", tc.ttl, dynamolock.AttrLeaseMS, got, tc.want)
		}
		_ = lz.Release(t.Context())
	}
}

// TestHugeLeaseDurationNotTakenOver: a lease duration whose nanoseconds
// overflow int64 must read as "very long", not wrap into a negative
// duration that lets a waiter take the lock over at its second look.
func TestHugeLeaseDurationNotTakenOver(t *testing.T) {
	name, newLocker := table(t)
	c, _ := testkit.DynamoDB(t)
	for _, ms := range []string{"9300000000000", "9223372036855", "99999999999999999999", "1e30"} {
		key := distlocktest.Key(t) + ms
		put(t, c, name, key, map[string]types.AttributeValue{
			dynamolock.AttrOwner: &types.AttributeValueMemberS{Value: "someone"}, dynamolock.AttrRVN: &types.AttributeValueMemberS{Value: "r1"},
			dynamolock.AttrLeaseMS: n(ms), dynamolock.AttrToken: n("5"),
		})
		l := newLocker(t)
		for range 2 {
			if lz, err := l.TryAcquire(t.Context(), key, nil); !errors.Is(err, distlock.ErrNotAcquired) {
				if lz != nil {
					_ = lz.Release(t.Context())
				}
				t.Fatalf("lease_ms %s: TryAcquire = %v, want ErrNotAcquired (the holder's lease has not run out)", ms, err)
			}
		}
	}
}

// TestTokenCounterExhausted: the counter may reach math.MaxInt64 (the
// last token), and then the lock is refused with ErrTokenExhausted — at
// once, even with context.Background — instead of ADDing past int64.
func TestTokenCounterExhausted(t *testing.T) {
	name, newLocker := table(t)
	c, _ := testkit.DynamoDB(t)
	key := distlocktest.Key(t)
	put(t, c, name, key, map[string]types.AttributeValue{dynamolock.AttrToken: n(strconv.FormatInt(math.MaxInt64-1, 10))})
	l := newLocker(t)
	lz, err := l.Acquire(t.Context(), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lz.Token() != math.MaxInt64 {
		t.Fatalf("token %d, want MaxInt64", lz.Token())
	}
	if err := lz.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	var aerr, terr error
	within(t, 10*time.Second, "Acquire", func() { _, aerr = l.Acquire(context.Background(), key, nil) })
	_, terr = newLocker(t).TryAcquire(t.Context(), key, nil)
	for _, err := range []error{aerr, terr} {
		if !errors.Is(err, distlock.ErrTokenExhausted) || errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("acquire after the last token = %v, want ErrTokenExhausted", err)
		}
	}
	it := item(t, c, name, key)
	if _, held := it[dynamolock.AttrOwner]; held || it[dynamolock.AttrToken].(*types.AttributeValueMemberN).Value != strconv.FormatInt(math.MaxInt64, 10) {
		t.Fatalf("item after the refusal: %v", it)
	}
	// A counter already past int64 (an older version ADDed on) is used up too.
	past := distlocktest.Key(t) + "past"
	put(t, c, name, past, map[string]types.AttributeValue{dynamolock.AttrToken: n("9223372036854775808")})
	if _, err := l.TryAcquire(t.Context(), past, nil); !errors.Is(err, distlock.ErrTokenExhausted) {
		t.Fatalf("counter past MaxInt64: TryAcquire = %v, want ErrTokenExhausted", err)
	}
}

// TestObservationsPruned: the observations a Locker keeps to tell when a
// holder stopped heartbeating (one per key it found held) are pruned once
// idle for twice the holder's lease: observing 200 held keys, then 200
// others after the first ones went idle, leaves far fewer than 400 (the
// old map grew with every key ever observed). A pruned key is observed
// afresh: the takeover still waits a whole lease.
func TestObservationsPruned(t *testing.T) {
	_, newLocker := table(t)
	holder, waiter := newLocker(t), newLocker(t)
	const n = 200
	waiter.PruneAfter(50*time.Millisecond, n/2) // the defaults: a minute, 1,024 keys
	keys := func(round int) []string {
		ks := make([]string, n)
		for i := range ks {
			ks[i] = fmt.Sprintf("%s/%d/%d", distlocktest.Key(t), round, i)
		}
		return ks
	}
	observe := func(ks []string) {
		for _, k := range ks {
			if _, err := waiter.TryAcquire(t.Context(), k, &distlock.Options{TTL: time.Millisecond}); !errors.Is(err, distlock.ErrNotAcquired) {
				t.Fatalf("TryAcquire of a held key = %v", err)
			}
		}
	}
	hold := func(ks []string) {
		for _, k := range ks {
			// A short lease (written for waiters): it is what an idle
			// observation must outlast twice to be pruned.
			if _, err := holder.Acquire(t.Context(), k, &distlock.Options{TTL: 20 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
		}
	}
	first, second := keys(1), keys(2)
	hold(first)
	observe(first)
	time.Sleep(100 * time.Millisecond) // the first keys' observations go idle for 2 leases and PruneAfter
	hold(second)
	observe(second)
	got := waiter.Observed()
	t.Logf("%d observations kept after observing %d held keys", got, 2*n)
	if got > n+n/2 {
		t.Fatalf("%d observations after observing %d held keys, %d of them idle: not pruned", got, 2*n, n)
	}
}
