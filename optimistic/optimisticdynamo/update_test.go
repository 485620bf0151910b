package optimisticdynamo_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/optimisticdynamo"
)

// fakeClient answers UpdateItem from memory, so that allocation counts
// measure Update itself, not the SDK or the network: failed is returned
// as the call's error (nil: success).
type fakeClient struct{ failed error }

var okOut = &dynamodb.UpdateItemOutput{}

func (c *fakeClient) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.failed != nil {
		return nil, c.failed
	}
	return okOut, nil
}

// maxAllocsUpdate bounds the allocations of one successful Update (one set
// attribute, small key and version, expression cached) with no hooks
// installed. Before the split and the expression cache the same call
// (optimistic.UpdateDynamoDB with this fake) allocated 32 times (also
// under -race); the request itself (the maps, the attribute values, the
// input) needs most of what remains. The bound leaves 2 for compiler and
// runtime changes.
const maxAllocsUpdate = 22

// TestUpdateAllocs: hooks cost nothing when unused. The conflict path
// looks hooks up only after the call failed and, finding none, allocates
// nothing more than the success path.
func TestUpdateAllocs(t *testing.T) {
	ctx := context.Background()
	tbl := optimistic.Table{Name: "counters"}
	set := map[string]any{"value": 7}
	conflict := &fakeClient{failed: &types.ConditionalCheckFailedException{Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: "1"}}}}
	success := &fakeClient{}
	ok := testing.AllocsPerRun(1000, func() { optimisticdynamo.Update(ctx, success, tbl, 1, 1, set) })
	miss := testing.AllocsPerRun(1000, func() { optimisticdynamo.Update(ctx, conflict, tbl, 1, 1, set) })
	t.Logf("allocations per Update: success %v, conflict %v (before the change: 32)", ok, miss)
	if ok > maxAllocsUpdate {
		t.Errorf("a successful Update allocates %v times; want at most %d", ok, maxAllocsUpdate)
	}
	if miss > ok {
		t.Errorf("a conflicting Update without hooks allocates %v times, the success path %v", miss, ok)
	}
	var got []observe.ConflictEvent
	hctx := observe.WithHooks(ctx, &observe.Hooks{Conflict: func(_ context.Context, e observe.ConflictEvent) { got = append(got, e) }})
	if _, err := optimisticdynamo.Update(hctx, conflict, tbl, 1, 1, set); !errors.Is(err, optimistic.ErrConflict) {
		t.Fatalf("conflict: %v", err)
	}
	if want := (observe.ConflictEvent{Package: "optimisticdynamo", Table: "counters"}); len(got) != 1 || got[0] != want {
		t.Fatalf("events %+v; want [%+v]", got, want)
	}
}
