package fenced_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/fenced"
)

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
	createTable(t, c, table, fenced.DefaultCounterKey)
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func TestPutDynamoDB(t *testing.T) {
	ctx := t.Context()
	c, prefix := ddb(t)
	g := fenced.Guard{Table: prefix + "orders"}
	createTable(t, c, g.Table, "id")
	read := func() (string, string) {
		out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(g.Table), Key: map[string]types.AttributeValue{"id": s("o1")}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item["state"].(*types.AttributeValueMemberS).Value, out.Item[fenced.DefaultTokenColumn].(*types.AttributeValueMemberN).Value
	}
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
		err := fenced.PutDynamoDB(ctx, c, g, item, st.tok)
		if !errors.Is(err, st.want) || (st.want == nil && err != nil) {
			t.Fatalf("step %d: %v, want %v", i, err, st.want)
		}
		if len(item) != len(before) {
			t.Fatal("PutDynamoDB modified the caller's item")
		}
		if state, tok := read(); state != st.wantState || tok != st.wantTok {
			t.Fatalf("step %d: item = (%s, %s), want (%s, %s)", i, state, tok, st.wantState, st.wantTok)
		}
	}
	for name, err := range map[string]error{
		"zero token":  fenced.PutDynamoDB(ctx, c, g, nil, 0),
		"empty table": fenced.PutDynamoDB(ctx, c, fenced.Guard{}, nil, 1),
		"token set":   fenced.PutDynamoDB(ctx, c, g, map[string]types.AttributeValue{"max_seen_token": s("x")}, 1),
	} {
		if err == nil || errors.Is(err, fenced.ErrStaleToken) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestPutDynamoDBConcurrentMaxWins(t *testing.T) {
	ctx := t.Context()
	c, prefix := ddb(t)
	g := fenced.Guard{Table: prefix + "race"}
	createTable(t, c, g.Table, "id")
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 16 {
		wg.Go(func() {
			<-start
			tok := fenced.Token((i*7)%16 + 1) // a permutation of 1..16
			err := fenced.PutDynamoDB(ctx, c, g, map[string]types.AttributeValue{"id": s("k"), "v": s(strconv.Itoa(int(tok)))}, tok)
			if err != nil && !errors.Is(err, fenced.ErrStaleToken) {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(g.Table), Key: map[string]types.AttributeValue{"id": s("k")}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if v := out.Item["v"].(*types.AttributeValueMemberS).Value; v != "16" {
		t.Fatalf("item has the data of token %s, want 16", v)
	}
}
