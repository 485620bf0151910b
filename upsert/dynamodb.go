package upsert

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/internal/dynamoapi"
	"github.com/concurkit/concurkit/internal/ident"
)

// DynamoDBClient is the part of *dynamodb.Client that the DynamoDB helpers
// use.
type DynamoDBClient interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ DynamoDBClient = (*dynamodb.Client)(nil)

// dynNotExists makes PutItem fail instead of replacing an existing item.
const dynNotExists = "attribute_not_exists(#k)"

// dynItem validates names and marshals row into an item. Values are
// converted with attributevalue.Marshal; a types.AttributeValue is used as
// is.
func dynItem(db DynamoDBClient, t Table, row map[string]any) (spec, map[string]types.AttributeValue, error) {
	s, err := t.validate(db, row, nil, nil)
	if err != nil {
		return s, nil, err
	}
	if err := ident.DynamoDBTable(t.Name); err != nil {
		return s, nil, fmt.Errorf("%w: table: %w", ErrInvalidArgument, err)
	}
	item := make(map[string]types.AttributeValue, len(row))
	for _, c := range s.cols {
		if err := ident.DynamoDBAttribute(c); err != nil {
			return s, nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
		av, err := dynamoapi.Marshal(row[c])
		if err != nil {
			return s, nil, fmt.Errorf("%w: value of %q: %w", ErrInvalidArgument, c, err)
		}
		item[c] = av
	}
	return s, item, nil
}

// dynPut runs the conditional PutItem; on a failed condition it returns the
// existing item when ALL_OLD was asked for.
func dynPut(ctx context.Context, db DynamoDBClient, t Table, item map[string]types.AttributeValue, returnOld bool) (created bool, old map[string]types.AttributeValue, err error) {
	in := &dynamodb.PutItemInput{
		TableName:                aws.String(t.Name),
		Item:                     item,
		ConditionExpression:      aws.String(dynNotExists),
		ExpressionAttributeNames: map[string]string{"#k": t.Key},
	}
	if returnOld {
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	_, err = db.PutItem(ctx, in)
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return false, failed.Item, nil
	case err != nil:
		return false, nil, driverError(ctx, "put into "+t.Name, err)
	}
	return true, nil, nil
}

// InsertDynamoDB inserts row as an item (it must contain the partition key
// t.Key) unless an item with that key exists, and reports whether it
// inserted: one PutItem with attribute_not_exists(key). t.Schema is
// ignored. Values are converted with attributevalue.Marshal (string → S,
// integers → N, …); a types.AttributeValue is used as is.
//
// Errors: ErrInvalidArgument before any I/O, or the SDK's error (matching
// context.Canceled when ctx ended the call).
func InsertDynamoDB(ctx context.Context, db DynamoDBClient, t Table, row map[string]any) (created bool, err error) {
	_, item, err := dynItem(db, t, row)
	if err != nil {
		return false, err
	}
	created, _, err = dynPut(ctx, db, t, item, false)
	return created, err
}

// InsertOrGetDynamoDB inserts row unless an item with its key exists and
// returns the item now stored — the new one or the existing one,
// unchanged — and whether it inserted, in one PutItem call
// (ReturnValuesOnConditionCheckFailure ALL_OLD returns the existing item
// with the failed condition).
//
// Errors: as InsertDynamoDB.
func InsertOrGetDynamoDB(ctx context.Context, db DynamoDBClient, t Table, row map[string]any) (item map[string]types.AttributeValue, created bool, err error) {
	_, item, err = dynItem(db, t, row)
	if err != nil {
		return nil, false, err
	}
	created, old, err := dynPut(ctx, db, t, item, true)
	switch {
	case err != nil:
		return nil, false, err
	case created:
		return item, true, nil
	case len(old) == 0:
		// Only a server that ignores ReturnValuesOnConditionCheckFailure
		// gets here (dynalite does); DynamoDB and DynamoDB Local return the
		// item.
		return nil, false, fmt.Errorf("upsert: put into %s: condition failed without the existing item (ReturnValuesOnConditionCheckFailure unsupported?)", t.Name)
	}
	return old, false, nil
}

// UpsertDynamoDB writes row's attributes to the item with its key,
// creating the item if it does not exist, and returns the item as stored
// afterwards and whether it was created: one UpdateItem that SETs every
// non-key attribute with ReturnValues ALL_OLD (no old item = created; the
// stored item is the old one with row's attributes laid over it, exactly
// what SET does). Attributes of an existing item that row does not name are
// kept.
//
// Errors: as InsertDynamoDB.
func UpsertDynamoDB(ctx context.Context, db DynamoDBClient, t Table, row map[string]any) (item map[string]types.AttributeValue, created bool, err error) {
	s, item, err := dynItem(db, t, row)
	if err != nil {
		return nil, false, err
	}
	in := &dynamodb.UpdateItemInput{
		TableName:    aws.String(t.Name),
		Key:          map[string]types.AttributeValue{t.Key: item[t.Key]},
		ReturnValues: types.ReturnValueAllOld,
	}
	if len(s.nonKey) > 0 {
		in.ExpressionAttributeNames = map[string]string{}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{}
		var set []string
		for i, c := range s.nonKey {
			n, v := "#c"+strconv.Itoa(i), ":c"+strconv.Itoa(i)
			in.ExpressionAttributeNames[n], in.ExpressionAttributeValues[v] = c, item[c]
			set = append(set, n+" = "+v)
		}
		in.UpdateExpression = aws.String("SET " + strings.Join(set, ", "))
	}
	out, err := db.UpdateItem(ctx, in)
	if err != nil {
		return nil, false, driverError(ctx, "update "+t.Name, err)
	}
	if len(out.Attributes) == 0 {
		return item, true, nil
	}
	stored := maps.Clone(out.Attributes)
	maps.Copy(stored, item)
	return stored, false, nil
}
