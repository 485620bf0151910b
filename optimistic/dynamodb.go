package optimistic

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/internal/dynamoapi"
	"github.com/concurkit/concurkit/internal/ident"
)

// DynamoDBClient is the part of *dynamodb.Client that UpdateDynamoDB uses.
type DynamoDBClient = dynamoapi.Updater

// Expressions of the DynamoDB CAS. attribute_exists(#k) makes a missing item
// fail the condition instead of being created by UpdateItem; with
// ReturnValuesOnConditionCheckFailure ALL_OLD the failure carries the item
// when it exists (a conflict) and no item when it does not (not found).
const (
	dynCondition = "attribute_exists(#k) AND #v = :expected"
	dynSetVer    = "SET #v = :next"
)

// UpdateDynamoDB is UpdatePostgres for DynamoDB: one conditional UpdateItem
// sets the attributes in set and the version attribute to
// expectedVersion+1 if the item with partition key key exists and its
// version is expectedVersion, and returns the new version. t.Name is the
// table name, t.Key the partition-key attribute, t.Version the version
// attribute (a number); t.Schema is ignored.
//
// key and the values in set are converted with attributevalue.Marshal
// (string → S, integers → N, []byte → B, …); a types.AttributeValue is used
// as is.
//
// Errors: ErrConflict, ErrNotFound (also matching sql.ErrNoRows),
// ErrInvalidArgument before any I/O (nil client, invalid names,
// expectedVersion <= 0, a value that cannot be marshalled;
// ErrVersionOverflow for expectedVersion math.MaxInt64), or the SDK's
// error (matching context.Canceled when ctx ended the call).
func UpdateDynamoDB(ctx context.Context, db DynamoDBClient, t Table, key any, expectedVersion int64, set map[string]any) (int64, error) {
	cols, err := t.validate(db, expectedVersion, set)
	if err != nil {
		return 0, err
	}
	if err := ident.DynamoDBTable(t.Name); err != nil {
		return 0, fmt.Errorf("%w: table: %w", ErrInvalidArgument, err)
	}
	for _, n := range append([]string{t.Key, t.Version}, cols...) {
		if err := ident.DynamoDBAttribute(n); err != nil {
			return 0, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
	}
	keyAV, err := dynamoapi.Marshal(key)
	if err != nil {
		return 0, fmt.Errorf("%w: key: %w", ErrInvalidArgument, err)
	}
	next := expectedVersion + 1
	names := map[string]string{"#k": t.Key, "#v": t.Version}
	values := map[string]types.AttributeValue{
		":expected": &types.AttributeValueMemberN{Value: strconv.FormatInt(expectedVersion, 10)},
		":next":     &types.AttributeValueMemberN{Value: strconv.FormatInt(next, 10)},
	}
	var update strings.Builder
	update.WriteString(dynSetVer)
	for i, c := range cols {
		n, v := "#c"+strconv.Itoa(i), ":c"+strconv.Itoa(i)
		av, err := dynamoapi.Marshal(set[c])
		if err != nil {
			return 0, fmt.Errorf("%w: value of %q: %w", ErrInvalidArgument, c, err)
		}
		names[n], values[v] = c, av
		fmt.Fprintf(&update, ", %s = %s", n, v)
	}
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(t.Name),
		Key:                                 map[string]types.AttributeValue{t.Key: keyAV},
		UpdateExpression:                    aws.String(update.String()),
		ConditionExpression:                 aws.String(dynCondition),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return outcome(false, len(failed.Item) > 0, 0)
	case err != nil:
		return 0, driverError(ctx, "update "+t.Name, err)
	}
	return outcome(true, true, next)
}
