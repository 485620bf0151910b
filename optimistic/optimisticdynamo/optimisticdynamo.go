package optimisticdynamo

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/internal/dynamoapi"
	"github.com/concurkit/concurkit/internal/ident"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/optimistic/internal/cas"
)

// Client is the part of *dynamodb.Client that Update calls (UpdateItem).
type Client = dynamoapi.Updater

var _ Client = (*dynamodb.Client)(nil)

// pkg prefixes this package's errors and names it in hook events.
const pkg = "optimisticdynamo"

// Expressions of the CAS. attribute_exists(#k) makes a missing item fail
// the condition instead of being created by UpdateItem; with
// ReturnValuesOnConditionCheckFailure ALL_OLD the failure carries the item
// when it exists (a conflict) and no item when it does not (not found).
// The set attributes are appended as ", #c0 = :c0, …".
const (
	condition  = "attribute_exists(#k) AND #v = :expected"
	setVersion = "SET #v = :next"
)

// expressions caches the validated UpdateExpression per (Table, set
// attributes).
var expressions cas.Cache[string]

// Update sets the attributes in set and the version attribute to
// expectedVersion+1 with one conditional UpdateItem, if the item of t.Name
// whose partition key t.KeyColumn is key exists and its version
// (t.VersionColumn, a number) is expectedVersion, and returns the new
// version. t.Schema is ignored.
//
// key and the values in set are converted with attributevalue.Marshal
// (string → S, integers → N, []byte → B, …); a types.AttributeValue is used
// as is.
//
// Errors: optimistic.ErrConflict (also reported to observe.Hooks.Conflict
// of ctx, Package "optimisticdynamo"); optimistic.ErrNotFound (also
// matching sql.ErrNoRows); before any I/O, an error matching
// concurkit.ErrInvalidArgument (nil client, invalid names, a set
// assigning the key or version, expectedVersion <= 0, a value that cannot
// be marshalled) or optimistic.ErrVersionOverflow (expectedVersion
// math.MaxInt64); or the SDK's error wrapped as
// "optimisticdynamo: update <table>: …" (matching context.Canceled when ctx
// ended the call).
func Update(ctx context.Context, db Client, t optimistic.Table, key any, expectedVersion int64, set map[string]any) (int64, error) {
	var buf [8]string
	t, cols, err := cas.Prepare(pkg, db, "client", t, expectedVersion, set, buf[:0])
	if err != nil {
		return 0, err
	}
	k := cas.KeyOf(t, cols)
	update, ok := expressions.Load(k)
	if !ok {
		if update, err = expression(t, cols); err != nil {
			return 0, err
		}
		expressions.Store(k, update)
	}
	keyAV, err := dynamoapi.Marshal(key)
	if err != nil {
		return 0, cas.InvalidErr(pkg, "key", err)
	}
	next := expectedVersion + 1
	names := make(map[string]string, 2+len(cols))
	names["#k"], names["#v"] = t.KeyColumn, t.VersionColumn
	values := make(map[string]types.AttributeValue, 2+len(cols))
	values[":expected"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(expectedVersion, 10)}
	values[":next"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(next, 10)}
	for i, c := range cols {
		av, err := dynamoapi.Marshal(set[c])
		if err != nil {
			return 0, cas.InvalidErr(pkg, "value of "+strconv.Quote(c), err)
		}
		n := strconv.Itoa(i)
		names["#c"+n], values[":c"+n] = c, av
	}
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(t.Name),
		Key:                                 map[string]types.AttributeValue{t.KeyColumn: keyAV},
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(condition),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return next, nil
	}
	// errors.AsType, unlike errors.As, does not allocate: the conflict
	// path costs no more than the success path.
	if failed, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		if len(failed.Item) > 0 {
			return 0, cas.Conflict(ctx, pkg, t)
		}
		return 0, optimistic.ErrNotFound
	}
	return 0, cas.DriverError(ctx, pkg, "update "+t.Name, err)
}

// expression validates t's DynamoDB names and cols and builds the
// UpdateExpression: the version, then the set attributes in cols order.
func expression(t optimistic.Table, cols []string) (string, error) {
	if err := ident.DynamoDBTable(t.Name); err != nil {
		return "", cas.InvalidErr(pkg, "table", err)
	}
	var update strings.Builder
	update.WriteString(setVersion)
	for i, n := range append([]string{t.KeyColumn, t.VersionColumn}, cols...) {
		if err := ident.DynamoDBAttribute(n); err != nil {
			return "", cas.InvalidErr(pkg, "attribute", err)
		}
		if i >= 2 {
			c := strconv.Itoa(i - 2)
			update.WriteString(", #c" + c + " = :c" + c)
		}
	}
	return update.String(), nil
}
