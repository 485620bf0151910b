package dynamolock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/dynamolock"
	"github.com/concurkit/concurkit/testkit"
)

// TestFrozenServer: with DynamoDB Local frozen (SIGSTOP: the socket stays
// open, nothing answers) and the SDK's default client options — three
// attempts, an HTTP client without an overall timeout — every call returns
// by the caller's deadline (Release, which distlock/internal/lease runs detached
// from the caller's context, within RequestTimeout), and the Locker works
// again once the server is thawed.
func TestFrozenServer(t *testing.T) {
	p := testkit.StartDynamoDB(t)
	c := dynamodb.New(dynamodb.Options{ // the defaults, but for the endpoint
		BaseEndpoint: aws.String("http://" + p.Addr), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("x", "x", ""),
	})
	if err := dynamolock.CreateTable(t.Context(), c, "locks", ""); err != nil {
		t.Fatal(err)
	}
	l, err := dynamolock.New(c, &dynamolock.Config{Table: "locks"}) // RequestTimeout: DefaultRequestTimeout
	t.Cleanup(func() { closeLocker(t, l) })
	if err != nil {
		t.Fatal(err)
	}
	held, err := l.Acquire(t.Context(), "held", &distlock.Options{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	held2, err := l.Acquire(t.Context(), "held2", &distlock.Options{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	p.Freeze(t)
	const deadline = time.Second
	const slack = 2 * time.Second // a loaded machine; the old code took 5–10 s
	calls := []struct {
		name  string
		bound time.Duration
		call  func(ctx context.Context) error
	}{
		{"Acquire", deadline, func(ctx context.Context) error {
			_, err := l.Acquire(ctx, "k1", nil)
			if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				return errors.Join(errors.New("want ErrNotAcquired and DeadlineExceeded"), err)
			}
			return nil
		}},
		{"TryAcquire", deadline, func(ctx context.Context) error {
			_, err := l.TryAcquire(ctx, "k2", nil)
			if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				return errors.Join(errors.New("want ErrNotAcquired and DeadlineExceeded"), err)
			}
			return nil
		}},
		{"Extend", deadline, func(ctx context.Context) error {
			if err := held.Extend(ctx, 0); err == nil || errors.Is(err, distlock.ErrLeaseLost) {
				return errors.Join(errors.New("want a timeout, not success or ErrLeaseLost"), err)
			}
			return nil
		}},
		{"release callback", deadline, func(ctx context.Context) error {
			if err := l.ReleaseOwner(ctx, "held", "someone"); !errors.Is(err, context.DeadlineExceeded) {
				return errors.Join(errors.New("want DeadlineExceeded"), err)
			}
			return nil
		}},
		{"Release", dynamolock.DefaultRequestTimeout, func(ctx context.Context) error {
			if err := held2.Release(ctx); err == nil {
				return errors.New("Release on a frozen server succeeded")
			}
			return nil
		}},
	}
	var wg sync.WaitGroup
	took := make([]time.Duration, len(calls))
	errs := make([]error, len(calls))
	for i, cl := range calls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			start := time.Now()
			errs[i] = cl.call(ctx)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, cl := range calls {
		t.Logf("%s on a frozen server returned after %v", cl.name, took[i].Round(time.Millisecond))
		if errs[i] != nil {
			t.Errorf("%s: %v", cl.name, errs[i])
		}
		if took[i] > cl.bound+slack {
			t.Errorf("%s returned after %v, want within %v", cl.name, took[i], cl.bound+slack)
		}
	}

	p.Thaw(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	lz, err := l.Acquire(ctx, "after-thaw", nil)
	if err != nil {
		t.Fatalf("Acquire after Thaw: %v", err)
	}
	if err := lz.Release(ctx); err != nil {
		t.Fatalf("Release after Thaw: %v", err)
	}
}

// TestAbandonedAcquireOnFrozenServer: an Acquire whose caller gives up
// while its request is queued on a frozen server (SIGSTOP) returns at
// once; after the thaw the server may apply the request and take the lock
// for nobody. The Locker keeps undoing that acquisition until it succeeds
// or the lease it wrote would have run out — not a single
// compare-and-delete that gives up while the server is still frozen — and
// Close waits for it: once Close returned, another Locker gets the key at
// once instead of after the lease. Whether the server applies a request
// its client stopped waiting for is up to it: the test repeats the
// scenario until a round shows the acquisition applied (the key's token
// counter moved) and checks every round.
func TestAbandonedAcquireOnFrozenServer(t *testing.T) {
	p := testkit.StartDynamoDB(t)
	c := dynamodb.New(dynamodb.Options{ // the defaults, but for the endpoint
		BaseEndpoint: aws.String("http://" + p.Addr), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("x", "x", ""),
	})
	if err := dynamolock.CreateTable(t.Context(), c, "locks", ""); err != nil {
		t.Fatal(err)
	}
	other, err := dynamolock.New(c, &dynamolock.Config{Table: "locks"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeLocker(t, other) })
	// A short request timeout: the abandoned request and the first
	// clean-ups time out while the server is frozen, so nothing tells the
	// Locker whether the acquisition was applied.
	const requestTimeout = 300 * time.Millisecond
	const ttl = 5 * time.Second
	applied := 0
	for round := 1; round <= 8 && applied < 2; round++ {
		key := fmt.Sprintf("k%d", round)
		l, err := dynamolock.New(c, &dynamolock.Config{Table: "locks", RequestTimeout: requestTimeout})
		t.Cleanup(func() { closeLocker(t, l) })
		if err != nil {
			t.Fatal(err)
		}
		p.Freeze(t)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, err = l.Acquire(ctx, key, &distlock.Options{TTL: ttl})
		cancel()
		if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			p.Thaw(t)
			t.Fatalf("round %d: Acquire on a frozen server = %v, want ErrNotAcquired and DeadlineExceeded", round, err)
		}
		// Frozen for several request timeouts: the request and the first
		// clean-ups time out unanswered; then the server runs what queued.
		time.Sleep(5 * requestTimeout)
		p.Thaw(t)

		cctx, ccancel := context.WithTimeout(t.Context(), 3*ttl)
		err = l.Close(cctx)
		ccancel()
		if err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String("locks"), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{dynamolock.DefaultKeyColumn: &types.AttributeValueMemberS{Value: key}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := out.Item[dynamolock.AttrToken]; ok {
			applied++
		}
		lz, err := other.TryAcquire(t.Context(), key, nil)
		if err != nil {
			t.Fatalf("round %d: TryAcquire after the abandoned Acquire's Locker was closed: %v (item %v: the acquisition applied after the thaw was left in place)", round, err, out.Item)
		}
		if err := lz.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("the server applied %d abandoned acquisition(s)", applied)
	if applied == 0 {
		t.Fatal("in 8 rounds the server never applied an abandoned acquisition: the scenario was not exercised")
	}
}
