package upsertdynamo

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
	"github.com/concurkit/concurkit/upsert"
	"github.com/concurkit/concurkit/upsert/internal/spec"
)

// Client is the part of *dynamodb.Client that the functions call
// (PutItem, UpdateItem).
type Client = dynamoapi.PutUpdater

var _ Client = (*dynamodb.Client)(nil)

// pkg prefixes this package's errors.
const pkg = "upsertdynamo"

// notExists makes PutItem fail instead of replacing an existing item.
const notExists = "attribute_not_exists(#k)"

// itemOf validates names and marshals row into an item. Values are
// converted with attributevalue.Marshal; a types.AttributeValue is used as
// is.
func itemOf(db Client, t upsert.Table, row map[string]any) (spec.Spec, map[string]types.AttributeValue, error) {
	s, err := spec.Validate(pkg, db, "client", t, row, nil, nil)
	if err != nil {
		return s, nil, err
	}
	if err := ident.DynamoDBTable(s.T.Name); err != nil {
		return s, nil, spec.InvalidErr(pkg, "table", err)
	}
	item := make(map[string]types.AttributeValue, len(row))
	for _, c := range s.Cols {
		if err := ident.DynamoDBAttribute(c); err != nil {
			return s, nil, spec.InvalidErr(pkg, "attribute", err)
		}
		av, err := dynamoapi.Marshal(row[c])
		if err != nil {
			return s, nil, spec.InvalidErr(pkg, fmt.Sprintf("value of %q", c), err)
		}
		item[c] = av
	}
	return s, item, nil
}

// put runs the conditional PutItem; on a failed condition it returns the
// existing item when ALL_OLD was asked for.
func put(ctx context.Context, db Client, t upsert.Table, item map[string]types.AttributeValue, returnOld bool) (created bool, old map[string]types.AttributeValue, err error) {
	in := &dynamodb.PutItemInput{
		TableName:                aws.String(t.Name),
		Item:                     item,
		ConditionExpression:      aws.String(notExists),
		ExpressionAttributeNames: map[string]string{"#k": t.KeyColumn},
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
		return false, nil, spec.DriverError(ctx, pkg, "put into "+t.Name, err)
	}
	return true, nil, nil
}

// Insert inserts row as an item (it must contain the partition key
// t.KeyColumn) unless an item with that key exists, and reports whether it
// inserted: one PutItem with attribute_not_exists(key). t.Schema is
// ignored.
//
// Errors: before any I/O, an error matching concurkit.ErrInvalidArgument
// (nil client, invalid names, no key value, a value that cannot be
// marshalled); otherwise the SDK's error wrapped as
// "upsertdynamo: put into <table>: …" (matching context.Canceled when ctx
// ended the call).
func Insert(ctx context.Context, db Client, t upsert.Table, row map[string]any) (created bool, err error) {
	s, item, err := itemOf(db, t, row)
	if err != nil {
		return false, err
	}
	created, _, err = put(ctx, db, s.T, item, false)
	return created, err
}

// InsertOrGet inserts row unless an item with its key exists and
// returns the item now stored — the new one or the existing one,
// unchanged — and whether it inserted, in one PutItem call
// (ReturnValuesOnConditionCheckFailure ALL_OLD returns the existing item
// with the failed condition).
//
// Errors: as Insert.
func InsertOrGet(ctx context.Context, db Client, t upsert.Table, row map[string]any) (item map[string]types.AttributeValue, created bool, err error) {
	s, item, err := itemOf(db, t, row)
	if err != nil {
		return nil, false, err
	}
	created, old, err := put(ctx, db, s.T, item, true)
	switch {
	case err != nil:
		return nil, false, err
	case created:
		return item, true, nil
	case len(old) == 0:
		// Only a server that ignores ReturnValuesOnConditionCheckFailure
		// gets here (dynalite does); DynamoDB and DynamoDB Local return the
		// item.
		return nil, false, fmt.Errorf("upsertdynamo: put into %s: condition failed without the existing item (ReturnValuesOnConditionCheckFailure unsupported?)", t.Name)
	}
	return old, false, nil
}

// Upsert writes row's attributes to the item with its key,
// creating the item if it does not exist, and returns the item as stored
// afterwards and whether it was created: one UpdateItem that SETs every
// non-key attribute with ReturnValues ALL_OLD (no old item = created; the
// stored item is the old one with row's attributes laid over it, exactly
// what SET does). Attributes of an existing item that row does not name are
// kept.
//
// Errors: as Insert (the SDK's error wrapped as
// "upsertdynamo: update <table>: …").
func Upsert(ctx context.Context, db Client, t upsert.Table, row map[string]any) (item map[string]types.AttributeValue, created bool, err error) {
	s, item, err := itemOf(db, t, row)
	if err != nil {
		return nil, false, err
	}
	in := &dynamodb.UpdateItemInput{
		TableName:    aws.String(s.T.Name),
		Key:          map[string]types.AttributeValue{s.T.KeyColumn: item[s.T.KeyColumn]},
		ReturnValues: types.ReturnValueAllOld,
	}
	if len(s.NonKey) > 0 {
		in.ExpressionAttributeNames = map[string]string{}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{}
		var set []string
		for i, c := range s.NonKey {
			n, v := "#c"+strconv.Itoa(i), ":c"+strconv.Itoa(i)
			in.ExpressionAttributeNames[n], in.ExpressionAttributeValues[v] = c, item[c]
			set = append(set, n+" = "+v)
		}
		in.UpdateExpression = aws.String("SET " + strings.Join(set, ", "))
	}
	out, err := db.UpdateItem(ctx, in)
	if err != nil {
		return nil, false, spec.DriverError(ctx, pkg, "update "+s.T.Name, err)
	}
	if len(out.Attributes) == 0 {
		return item, true, nil
	}
	stored := maps.Clone(out.Attributes)
	maps.Copy(stored, item)
	return stored, false, nil
}
