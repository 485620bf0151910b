package fenceddynamo_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fenceddynamo"
	"github.com/concurkit/concurkit/observe"
)

// fakeClient accepts every write.
type fakeClient struct{}

func (fakeClient) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, nil
}

func (fakeClient) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{}, nil
}

// TestHooksCostNothing: an accepted Put allocates the same with hooks
// installed as without: they are looked up only when a write is refused.
func TestHooksCostNothing(t *testing.T) {
	ctx := context.Background()
	hooked := observe.WithHooks(ctx, &observe.Hooks{FenceRejected: func(context.Context, observe.FenceEvent) {}})
	item := map[string]types.AttributeValue{"id": s("x"), "v": s("y")}
	for _, g := range []fenced.Table{{Name: "table"}, {Name: "table", VersionColumn: "version"}} {
		allocs := func(ctx context.Context) float64 {
			return testing.AllocsPerRun(100, func() {
				if err := fenceddynamo.Put(ctx, fakeClient{}, g, item, 7); err != nil {
					t.Fatal(err)
				}
			})
		}
		if plain, withHooks := allocs(ctx), allocs(hooked); plain != withHooks {
			t.Errorf("%+v: %v allocations per Put with hooks, %v without", g, withHooks, plain)
		}
	}
}
