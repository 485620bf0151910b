package dynamolock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/goleak"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/dynamolock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fenceddynamo"
	"github.com/concurkit/concurkit/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// table creates a lock table for the test and returns a factory of
// independent lockers (each with its own client, as separate processes).
func table(t *testing.T) (string, func(t *testing.T) *dynamolock.Locker) {
	t.Helper()
	c, prefix := testkit.DynamoDB(t)
	name := prefix + "locks"
	if err := dynamolock.CreateTable(t.Context(), c, name, ""); err != nil {
		t.Fatal(err)
	}
	endpoint := testkit.DynamoDBEndpoint(t)
	return name, func(t *testing.T) *dynamolock.Locker {
		l, err := dynamolock.New(testkit.DynamoDBClient(t, endpoint), &dynamolock.Config{Table: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeLocker(t, l) })
		return l
	}
}

// closeLocker closes l, waiting for its background cleanups (before the
// client goes and the package's goroutine-leak check runs).
func closeLocker(t *testing.T, l distlock.Closer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// dynamoStore is the Kleppmann store on DynamoDB itself (fenceddynamo.Put).
type dynamoStore struct {
	c     *dynamodb.Client
	table string
}

func (s dynamoStore) item(v string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "order-1"}, "value": &types.AttributeValueMemberS{Value: v}}
}

func (s dynamoStore) Write(ctx context.Context, tok fenced.Token, v string) error {
	return fenceddynamo.Put(ctx, s.c, fenced.Table{Name: s.table}, s.item(v), tok)
}

func (s dynamoStore) WriteUnfenced(ctx context.Context, v string) error {
	_, err := s.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: s.item(v)})
	return err
}

func (s dynamoStore) Read(ctx context.Context) (string, error) {
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "order-1"}}})
	if err != nil {
		return "", err
	}
	v, _ := out.Item["value"].(*types.AttributeValueMemberS)
	if v == nil {
		return "", errors.New("no item")
	}
	return v.Value, nil
}

func newDynamoStore(t *testing.T) distlocktest.Store {
	c, prefix := testkit.DynamoDB(t)
	s := dynamoStore{c: c, table: prefix + "orders"}
	_, err := c.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(s.table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	_, newLocker := table(t)
	// DynamoDB Local answers a request in milliseconds and every waiter
	// polls: 8 × 25 sections keep the suite's run short on a shared machine.
	distlocktest.Run(t, func(t *testing.T) distlock.Locker { return newLocker(t) }, distlocktest.Options{Goroutines: 8, Sections: 25})
}

// TestKleppmannDynamoStore: the same scenario with the fenced write on
// DynamoDB itself (ConditionExpression on max_seen_token).
func TestKleppmannDynamoStore(t *testing.T) {
	_, newLocker := table(t)
	distlocktest.Kleppmann(t, func(t *testing.T) distlock.Locker { return newLocker(t) }, distlocktest.Options{Store: newDynamoStore})
}

// TestTakeoverAfterObservedExpiry: a holder that stops heartbeating is
// taken over only after the waiter itself watched the RVN for the lease
// duration; TryAcquire before that fails; the holder's heartbeat and
// release then report ErrLeaseLost and leave the new holder alone.
func TestTakeoverAfterObservedExpiry(t *testing.T) {
	_, newLocker := table(t)
	la, lb, lc := newLocker(t), newLocker(t), newLocker(t)
	key := distlocktest.Key(t)
	ttl := 600 * time.Millisecond
	a, err := la.Acquire(t.Context(), key, &distlock.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	// b's first observation: held.
	if _, err := lb.TryAcquire(t.Context(), key, nil); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire on a fresh lease = %v", err)
	}
	observed := time.Now()
	// a heartbeats: new RVN, so b's observation restarts.
	if err := a.Extend(t.Context(), ttl); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl) // a now stops heartbeating (paused)
	if _, err := lb.TryAcquire(t.Context(), key, nil); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire right after a heartbeat = %v (the old RVN observation must not count)", err)
	}
	time.Sleep(ttl + 50*time.Millisecond)
	b, err := lb.TryAcquire(t.Context(), key, &distlock.Options{TTL: time.Minute})
	if err != nil {
		t.Fatalf("TryAcquire after watching the RVN for the lease duration: %v", err)
	}
	if time.Since(observed) < 2*ttl {
		t.Fatalf("takeover after %v, before two lease durations", time.Since(observed))
	}
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after %d", b.Token(), a.Token())
	}
	if a.Context().Err() == nil {
		t.Fatal("the paused holder's context was still live at takeover")
	}
	if err := a.Extend(t.Context(), ttl); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("old holder's Extend = %v", err)
	}
	if err := a.Release(t.Context()); !errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("old holder's Release = %v", err)
	}
	if _, err := lc.TryAcquire(t.Context(), key, nil); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("the new holder's lock is gone: %v", err)
	}
	if err := b.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// flaky wraps the client: the first heartbeat is applied by DynamoDB but
// its answer is "lost" (a timeout error is returned instead), as in
// dynamolock#280.
type flaky struct {
	dynamolock.Client
	lost int
}

func (f *flaky) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := f.Client.UpdateItem(ctx, in, opt...)
	if err == nil && aws.ToString(in.UpdateExpression) == "SET #rvn = :rvn, #lease = :lease" && f.lost > 0 {
		f.lost--
		return nil, context.DeadlineExceeded
	}
	return out, err
}

// TestAmbiguousHeartbeat: a heartbeat applied on the server whose answer
// was lost does not lose the lease: the retry still matches (condition on
// the owner secret, not the old RVN).
func TestAmbiguousHeartbeat(t *testing.T) {
	name, _ := table(t)
	c := testkit.DynamoDBClient(t, testkit.DynamoDBEndpoint(t))
	f := &flaky{Client: c, lost: 1}
	l, err := dynamolock.New(f, &dynamolock.Config{Table: name})
	t.Cleanup(func() { closeLocker(t, l) })
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Acquire(t.Context(), distlocktest.Key(t), &distlock.Options{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Extend(t.Context(), 5*time.Second); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, distlock.ErrLeaseLost) {
		t.Fatalf("ambiguous heartbeat = %v, want the timeout, not ErrLeaseLost", err)
	}
	if a.Context().Err() != nil {
		t.Fatal("an ambiguous heartbeat lost the lease")
	}
	if err := a.Extend(t.Context(), 5*time.Second); err != nil {
		t.Fatalf("retried heartbeat = %v", err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestAmbiguousAcquire: an acquisition applied on the server whose answer
// was lost is recognised by the retry (same owner secret) instead of
// waiting a lease duration for itself.
func TestAmbiguousAcquire(t *testing.T) {
	name, newLocker := table(t)
	c := testkit.DynamoDBClient(t, testkit.DynamoDBEndpoint(t))
	f := &lostTake{Client: c, lost: 1}
	l, err := dynamolock.New(f, &dynamolock.Config{Table: name})
	t.Cleanup(func() { closeLocker(t, l) })
	if err != nil {
		t.Fatal(err)
	}
	key := distlocktest.Key(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second) // far less than the 1m TTL
	defer cancel()
	a, err := l.Acquire(ctx, key, &distlock.Options{TTL: time.Minute})
	if err != nil {
		t.Fatalf("Acquire after a lost answer: %v", err)
	}
	if _, err := newLocker(t).TryAcquire(t.Context(), key, nil); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire = %v", err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

type lostTake struct {
	dynamolock.Client
	lost int
}

// UpdateItem reports the first acquisition as a retryable error after
// DynamoDB applied it.
func (f *lostTake) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := f.Client.UpdateItem(ctx, in, opt...)
	if err == nil && f.lost > 0 && strings.HasPrefix(aws.ToString(in.ConditionExpression), "attribute_not_exists(#owner)") {
		f.lost--
		return nil, context.DeadlineExceeded // the answer timed out
	}
	return out, err
}

func TestNewBadInput(t *testing.T) {
	if _, err := dynamolock.New(nil, &dynamolock.Config{Table: "t"}); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatalf("nil client: %v", err)
	}
	c, _ := testkit.DynamoDB(t)
	for _, o := range []*dynamolock.Config{nil, {}, {Table: "t", PollMin: -1}, {Table: "t", RequestTimeout: -1}, {Table: "t", CleanupTimeout: -1}} {
		if _, err := dynamolock.New(c, o); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Fatalf("New(%+v) = %v", o, err)
		}
	}
	// A nil or zero Locker is bad input too, not a panic.
	for name, l := range map[string]*dynamolock.Locker{"nil": nil, "zero": new(dynamolock.Locker)} {
		if _, err := l.Acquire(t.Context(), "k", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s Locker: Acquire = %v", name, err)
		}
		if _, err := l.TryAcquire(t.Context(), "k", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s Locker: TryAcquire = %v", name, err)
		}
	}
}
