package fenceddynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/internal/guard"
	"github.com/concurkit/concurkit/internal/dynamoapi"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
)

// Client is the part of *dynamodb.Client that the package uses: PutItem
// for Put, UpdateItem for a versioned Put and for Counter.
type Client = dynamoapi.PutUpdater

var _ Client = (*dynamodb.Client)(nil)

const pkg = "fenceddynamo"

// Expressions; attribute names go through ExpressionAttributeNames, so any
// name is safe.
const (
	// ddbGuard accepts a write if the item does not exist, predates
	// fencing (no token attribute) or has a token ≤ ours.
	ddbGuard = "attribute_not_exists(#tok) OR #tok <= :tok"
	// ddbSetToken starts a versioned Put's update; ", #a0 = :a0, …" and
	// ddbAddVersion follow.
	ddbSetToken   = "SET #tok = :tok"
	ddbAddVersion = " ADD #ver :one"
)

// Put writes item (attribute name → value) to the table t.Name with the
// token attribute t.TokenColumn (default fenced.DefaultTokenColumn) set to
// token, in one conditional write that is accepted only if the stored item
// does not exist, has no token yet, or has a token ≤ token. t.Schema is
// unused; item is not modified.
//
// Without t.VersionColumn, the write is a PutItem: the item replaces the
// stored one. With t.VersionColumn set, it is an UpdateItem on the item
// whose partition key t.KeyColumn (default fenced.DefaultKeyColumn; item
// must contain it, and the table must have no sort key) that SETs every
// other attribute of item and ADDs 1 to the version attribute (a new item
// gets version 1), in the same conditional write: a replace cannot
// increment a stored number, so attributes that item does not name are
// kept rather than removed.
//
// It returns nil when the item was written (an equal token passes) and
// fenced.ErrStaleToken when the stored item has a higher token (reported to
// observe.Hooks.FenceRejected with the token seen). Before any I/O:
// fenced.ErrInvalidToken for token ≤ 0 and errors matching
// concurkit.ErrInvalidArgument for a nil client, an invalid table or
// attribute name, or an item that sets the token or version attribute
// itself (or lacks the key attribute of a versioned Put). SDK errors are
// wrapped and match ctx.Err() when ctx ended the call.
func Put(ctx context.Context, db Client, t fenced.Table, item map[string]types.AttributeValue, token fenced.Token) error {
	if handle.IsNil(db) {
		return guard.Invalid(pkg, "nil client")
	}
	if err := guard.CheckToken(token); err != nil {
		return err
	}
	if err := ident.DynamoDBTable(t.Name); err != nil {
		return guard.Invalid(pkg, "table: %v", err)
	}
	tok := t.TokenColumn
	if tok == "" {
		tok = fenced.DefaultTokenColumn
	}
	if err := ident.DynamoDBAttribute(tok); err != nil {
		return guard.Invalid(pkg, "token attribute: %v", err)
	}
	if _, ok := item[tok]; ok {
		return guard.Invalid(pkg, "item sets the token attribute %q itself", tok)
	}
	n := &types.AttributeValueMemberN{Value: strconv.FormatInt(int64(token), 10)}
	var err error
	var old map[string]types.AttributeValue // the stored item when the condition failed
	if t.VersionColumn == "" {
		full := make(map[string]types.AttributeValue, len(item)+1)
		maps.Copy(full, item)
		full[tok] = n
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                           aws.String(t.Name),
			Item:                                full,
			ConditionExpression:                 aws.String(ddbGuard),
			ExpressionAttributeNames:            map[string]string{"#tok": tok},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":tok": n},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
	} else {
		in, ierr := versionedPut(t, tok, item, n)
		if ierr != nil {
			return ierr
		}
		_, err = db.UpdateItem(ctx, in)
	}
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		old = ccf.Item
	case err != nil:
		return guard.DriverError(ctx, pkg, "guarded put "+t.Name, err)
	default:
		return nil
	}
	var seen fenced.Token
	if v, err := numberAttr(old, tok); err == nil {
		seen = fenced.Token(v)
	}
	return guard.Stale(ctx, pkg, t.Name, token, seen)
}

// versionedPut builds the UpdateItem of a Put with a version attribute.
func versionedPut(t fenced.Table, tok string, item map[string]types.AttributeValue, n types.AttributeValue) (*dynamodb.UpdateItemInput, error) {
	key, ver := t.KeyColumn, t.VersionColumn
	if key == "" {
		key = fenced.DefaultKeyColumn
	}
	for what, name := range map[string]string{"key": key, "version": ver} {
		if err := ident.DynamoDBAttribute(name); err != nil {
			return nil, guard.Invalid(pkg, "%s attribute: %v", what, err)
		}
	}
	if key == tok || ver == tok || ver == key {
		return nil, guard.Invalid(pkg, "key %q, token %q and version %q attributes must differ", key, tok, ver)
	}
	if _, ok := item[ver]; ok {
		return nil, guard.Invalid(pkg, "item sets the version attribute %q itself", ver)
	}
	kv, ok := item[key]
	if !ok || handle.IsNil(kv) {
		return nil, guard.Invalid(pkg, "item has no key attribute %q", key)
	}
	names := map[string]string{"#tok": tok, "#ver": ver}
	values := map[string]types.AttributeValue{":tok": n, ":one": &types.AttributeValueMemberN{Value: "1"}}
	var update strings.Builder
	update.WriteString(ddbSetToken)
	// Sorted, so that the same item shape gives the same expression.
	for i, a := range slices.Sorted(maps.Keys(item)) {
		if a == key {
			continue
		}
		if err := ident.DynamoDBAttribute(a); err != nil {
			return nil, guard.Invalid(pkg, "attribute: %v", err)
		}
		ns, vs := "#a"+strconv.Itoa(i), ":a"+strconv.Itoa(i)
		names[ns], values[vs] = a, item[a]
		update.WriteString(", " + ns + " = " + vs)
	}
	update.WriteString(ddbAddVersion)
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(t.Name),
		Key:                                 map[string]types.AttributeValue{key: kv},
		UpdateExpression:                    aws.String(update.String()),
		ConditionExpression:                 aws.String(ddbGuard),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, nil
}

// numberAttr returns the int64 value of the number attribute name in
// item, or an error if it is missing or not an integer.
func numberAttr(item map[string]types.AttributeValue, name string) (int64, error) {
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %q missing or not a number", name)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %q: %w", name, err)
	}
	return v, nil
}
