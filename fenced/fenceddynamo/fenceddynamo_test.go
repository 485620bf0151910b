package fenceddynamo_test

import (
	"context"
	"errors"
	"maps"
	"math"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fenceddynamo"
	"github.com/concurkit/concurkit/fenced/internal/fencedtest"
	"github.com/concurkit/concurkit/observe"
)

func getItem(t *testing.T, c *dynamodb.Client, table, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"id": s(id)}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func str(item map[string]types.AttributeValue, name string) string {
	switch v := item[name].(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	}
	return ""
}

func TestPut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, prefix := ddb(t)
	g := fenced.Table{Name: prefix + "orders"}
	createTable(t, c, g.Name, "id")
	steps := []struct {
		tok       fenced.Token
		state     string
		want      error
		wantState string
		wantTok   string
	}{
		{3, "a", nil, "a", "3"},
		{3, "a2", nil, "a2", "3"},
		{8, "b", nil, "b", "8"},
		{5, "stale", fenced.ErrStaleToken, "b", "8"},
		{8, "b2", nil, "b2", "8"},
	}
	for i, st := range steps {
		item := map[string]types.AttributeValue{"id": s("o1"), "state": s(st.state)}
		before := maps.Clone(item)
		err := fenceddynamo.Put(ctx, c, g, item, st.tok)
		if !errors.Is(err, st.want) || (st.want == nil && err != nil) {
			t.Fatalf("step %d: %v, want %v", i, err, st.want)
		}
		if len(item) != len(before) {
			t.Fatal("Put modified the caller's item")
		}
		got := getItem(t, c, g.Name, "o1")
		if state, tok := str(got, "state"), str(got, fenced.DefaultTokenColumn); state != st.wantState || tok != st.wantTok {
			t.Fatalf("step %d: item = (%s, %s), want (%s, %s)", i, state, tok, st.wantState, st.wantTok)
		}
	}
}

func TestPutConcurrentMaxWins(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, prefix := ddb(t)
	for _, g := range []fenced.Table{{Name: prefix + "race"}, {Name: prefix + "racev", VersionColumn: "version"}} {
		createTable(t, c, g.Name, "id")
		var wg sync.WaitGroup
		start := make(chan struct{})
		var accepted sync.Map
		for i := range 16 {
			wg.Go(func() {
				<-start
				tok := fenced.Token((i*7)%16 + 1) // a permutation of 1..16
				err := fenceddynamo.Put(ctx, c, g, map[string]types.AttributeValue{"id": s("k"), "v": s(strconv.Itoa(int(tok)))}, tok)
				if err != nil && !errors.Is(err, fenced.ErrStaleToken) {
					t.Error(err)
				}
				if err == nil {
					accepted.Store(tok, true)
				}
			})
		}
		close(start)
		wg.Wait()
		item := getItem(t, c, g.Name, "k")
		if v := str(item, "v"); v != "16" {
			t.Fatalf("%s: item has the data of token %s, want 16", g.Name, v)
		}
		if g.VersionColumn != "" {
			n := 0
			accepted.Range(func(any, any) bool { n++; return true })
			if v := str(item, "version"); v != strconv.Itoa(n) {
				t.Fatalf("%s: version %s after %d accepted writes", g.Name, v, n)
			}
		}
	}
}

// TestPutVersioned: with VersionColumn, an accepted Put ADDs 1 to the
// version in the same conditional write (a new item gets 1), a refused one
// does not, and an optimistic conditional update with the version read
// before the fenced Put fails.
func TestPutVersioned(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, prefix := ddb(t)
	g := fenced.Table{Name: prefix + "accounts", VersionColumn: "version"}
	createTable(t, c, g.Name, "id")
	put := func(tok fenced.Token, balance string) error {
		return fenceddynamo.Put(ctx, c, g, map[string]types.AttributeValue{"id": s("a1"), "balance": n(balance)}, tok)
	}
	check := func(what, balance, version, token string) {
		t.Helper()
		item := getItem(t, c, g.Name, "a1")
		if str(item, "balance") != balance || str(item, "version") != version || str(item, fenced.DefaultTokenColumn) != token {
			t.Fatalf("%s: item %v, want balance %s version %s token %s", what, item, balance, version, token)
		}
	}
	cas := func(version, balance string) error {
		_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(g.Name),
			Key:                       map[string]types.AttributeValue{"id": s("a1")},
			UpdateExpression:          aws.String("SET balance = :b ADD version :one"),
			ConditionExpression:       aws.String("version = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":b": n(balance), ":one": n("1"), ":v": n(version)},
		})
		return err
	}
	if err := put(5, "100"); err != nil {
		t.Fatal(err)
	}
	check("insert", "100", "1", "5")
	if err := put(5, "90"); err != nil {
		t.Fatal(err)
	}
	check("equal token", "90", "2", "5")
	var ccf *types.ConditionalCheckFailedException
	if err := cas("1", "0"); !errors.As(err, &ccf) {
		t.Fatalf("CAS with the version read before the fenced Put: %v, want a failed condition", err)
	}
	if err := cas("2", "80"); err != nil {
		t.Fatal(err)
	}
	check("CAS", "80", "3", "5")
	if err := put(4, "0"); !errors.Is(err, fenced.ErrStaleToken) {
		t.Fatalf("stale put: %v", err)
	}
	check("stale put", "80", "3", "5")
	// The versioned Put updates: attributes the item does not name stay.
	if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(g.Name), Key: map[string]types.AttributeValue{"id": s("a1")},
		UpdateExpression: aws.String("SET note = :n"), ExpressionAttributeValues: map[string]types.AttributeValue{":n": s("kept")}}); err != nil {
		t.Fatal(err)
	}
	if err := put(6, "70"); err != nil {
		t.Fatal(err)
	}
	check("higher token", "70", "4", "6")
	if note := str(getItem(t, c, g.Name, "a1"), "note"); note != "kept" {
		t.Fatalf("note = %q after a versioned Put, want kept", note)
	}
}

func TestBadInput(t *testing.T) {
	ctx := t.Context()
	c, prefix := ddb(t)
	g := fenced.Table{Name: prefix + "orders"}
	v := fenced.Table{Name: prefix + "orders", VersionColumn: "version"}
	id := map[string]types.AttributeValue{"id": s("x")}
	for name, tc := range map[string]struct {
		err  error
		want error
	}{
		"zero token":          {fenceddynamo.Put(ctx, c, g, nil, 0), fenced.ErrInvalidToken},
		"negative token":      {fenceddynamo.Put(ctx, c, g, nil, -1), fenced.ErrInvalidToken},
		"empty table":         {fenceddynamo.Put(ctx, c, fenced.Table{}, nil, 1), concurkit.ErrInvalidArgument},
		"bad table name":      {fenceddynamo.Put(ctx, c, fenced.Table{Name: "a b"}, nil, 1), concurkit.ErrInvalidArgument},
		"token set":           {fenceddynamo.Put(ctx, c, g, map[string]types.AttributeValue{"max_seen_token": s("x")}, 1), concurkit.ErrInvalidArgument},
		"version set":         {fenceddynamo.Put(ctx, c, v, map[string]types.AttributeValue{"id": s("x"), "version": n("1")}, 1), concurkit.ErrInvalidArgument},
		"no key":              {fenceddynamo.Put(ctx, c, v, map[string]types.AttributeValue{"a": s("x")}, 1), concurkit.ErrInvalidArgument},
		"version is token":    {fenceddynamo.Put(ctx, c, fenced.Table{Name: g.Name, VersionColumn: "max_seen_token"}, id, 1), concurkit.ErrInvalidArgument},
		"version is key":      {fenceddynamo.Put(ctx, c, fenced.Table{Name: g.Name, VersionColumn: "id"}, id, 1), concurkit.ErrInvalidArgument},
		"NUL in attribute":    {fenceddynamo.Put(ctx, c, v, map[string]types.AttributeValue{"id": s("x"), "a\x00": s("y")}, 1), concurkit.ErrInvalidArgument},
		"counter empty name":  {newCounter(c, prefix+"counters", ""), concurkit.ErrInvalidArgument},
		"counter bad table":   {newCounter(c, "x", "n"), concurkit.ErrInvalidArgument},
		"counter empty table": {newCounter(c, "", "n"), concurkit.ErrInvalidArgument},
	} {
		if !errors.Is(tc.err, tc.want) || !errors.Is(tc.err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want %v", name, tc.err, tc.want)
		}
	}
}

func newCounter(c fenceddynamo.Client, table, name string) error {
	_, err := fenceddynamo.NewCounter(c, table, name, nil)
	return err
}

func TestCounter(t *testing.T) {
	t.Parallel()
	client, prefix := ddb(t)
	table := prefix + "counters"
	createCounterTable(t, client, table)
	src, err := fenceddynamo.NewCounter(client, table, "lock-tokens", nil)
	if err != nil {
		t.Fatal(err)
	}
	fencedtest.Source(t, src)

	other := prefix + "counters2"
	createTable(t, client, other, "k")
	src2, err := fenceddynamo.NewCounter(client, other, "c", &fenceddynamo.CounterOptions{KeyColumn: "k", ValueColumn: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := src2.Next(t.Context()); tok != 1 || err != nil {
		t.Fatalf("counter with custom attributes: %d, %v", tok, err)
	}
}

// TestCounterAtItsLimit: DynamoDB numbers have 38 digits, so the counter
// itself goes past math.MaxInt64; Go used to fail with a bare strconv
// range error there. It mints math.MaxInt64, then ErrTokenOverflow.
func TestCounterAtItsLimit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client, prefix := ddb(t)
	table := prefix + "counters"
	createCounterTable(t, client, table)
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			fenceddynamo.DefaultCounterKey:   s("tokens"),
			fenceddynamo.DefaultCounterValue: n(strconv.FormatInt(math.MaxInt64-1, 10)),
		},
	}); err != nil {
		t.Fatal(err)
	}
	src, err := fenceddynamo.NewCounter(client, table, "tokens", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := src.Next(ctx); err != nil || tok != math.MaxInt64 {
		t.Fatalf("last token = %d, %v; want %d", tok, err, int64(math.MaxInt64))
	}
	for range 2 {
		tok, err := src.Next(ctx)
		if !errors.Is(err, fenced.ErrTokenOverflow) || !errors.Is(err, fenced.ErrInvalidToken) || tok != 0 {
			t.Fatalf("past the limit: %d, %v; want ErrTokenOverflow", tok, err)
		}
	}
}

// TestNilHandles: a nil client — untyped or a typed nil *dynamodb.Client —
// and a nil *Counter are errors matching concurkit.ErrInvalidArgument,
// never a panic.
func TestNilHandles(t *testing.T) {
	ctx := context.Background()
	var client *dynamodb.Client
	var nilCounter *fenceddynamo.Counter
	g := fenced.Table{Name: "table"}
	for name, run := range map[string]func() error{
		"Put/nil":              func() error { return fenceddynamo.Put(ctx, nil, g, nil, 1) },
		"Put/typed nil":        func() error { return fenceddynamo.Put(ctx, client, g, nil, 1) },
		"NewCounter/nil":       func() error { return newCounter(nil, "table", "n") },
		"NewCounter/typed nil": func() error { return newCounter(client, "table", "n") },
		"(*Counter)(nil).Next": func() error { _, err := nilCounter.Next(ctx); return err },
		"Put/versioned, typed nil": func() error {
			return fenceddynamo.Put(ctx, client, fenced.Table{Name: "table", VersionColumn: "v"}, nil, 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panicked: %v", r)
				}
			}()
			if err := run(); !errors.Is(err, concurkit.ErrInvalidArgument) {
				t.Fatalf("err = %v; want concurkit.ErrInvalidArgument", err)
			}
		})
	}
}

// TestHooks: a refused Put is reported to FenceRejected with the token the
// stored item had (from the failed condition's ALL_OLD item).
func TestHooks(t *testing.T) {
	t.Parallel()
	c, prefix := ddb(t)
	ctx, events := fencedtest.Rejections(t.Context())
	for _, g := range []fenced.Table{{Name: prefix + "h"}, {Name: prefix + "hv", VersionColumn: "version"}} {
		createTable(t, c, g.Name, "id")
		item := map[string]types.AttributeValue{"id": s("x")}
		if err := fenceddynamo.Put(ctx, c, g, item, 9); err != nil {
			t.Fatal(err)
		}
		if err := fenceddynamo.Put(ctx, c, g, item, 4); !errors.Is(err, fenced.ErrStaleToken) || observe.ErrorType(err) != "stale_token" {
			t.Fatalf("stale put = %v", err)
		}
	}
	want := []observe.FenceEvent{
		{Package: "fenceddynamo", Resource: prefix + "h", Token: 4, Seen: 9},
		{Package: "fenceddynamo", Resource: prefix + "hv", Token: 4, Seen: 9},
	}
	got := events()
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("events %+v, want %+v", got, want)
	}
}
