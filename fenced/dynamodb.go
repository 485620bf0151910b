package fenced

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/internal/dynamoapi"
	"github.com/concurkit/concurkit/internal/handle"
)

// DynamoDBPutter is the part of *dynamodb.Client that PutDynamoDB uses.
type DynamoDBPutter interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// DynamoDBUpdater is the part of *dynamodb.Client that DynamoDBCounter uses.
type DynamoDBUpdater = dynamoapi.Updater

var _ DynamoDBPutter = (*dynamodb.Client)(nil)

// Expressions; attribute names go through ExpressionAttributeNames, so any
// name is safe.
const (
	ddbGuard = "attribute_not_exists(#tok) OR #tok <= :tok"
	ddbAdd   = "ADD #v :one"
)

// DefaultCounterKey and DefaultCounterValue are the attribute names of a
// DynamoDBCounter's item: a string partition key and a number.
const (
	DefaultCounterKey   = "pk"
	DefaultCounterValue = "token"
)

// PutDynamoDB writes item to the table g.Table with g.TokenColumn (default
// DefaultTokenColumn) set to token, in one PutItem whose
// ConditionExpression accepts the write only if the stored item has no
// token yet (or does not exist) or a token ≤ token. g.KeyColumn and
// g.Schema are unused. item is not modified.
//
// It returns nil when the item was written (an equal token passes),
// ErrStaleToken when the stored item has a higher token, ErrInvalidToken
// for token ≤ 0, ErrInvalidGuard for an empty table or an item that
// already sets the token attribute, ErrNilHandle for a nil client, and SDK
// errors wrapped.
func PutDynamoDB(ctx context.Context, db DynamoDBPutter, g Guard, item map[string]types.AttributeValue, token Token) error {
	if handle.IsNil(db) {
		return ErrNilHandle
	}
	if err := checkToken(token); err != nil {
		return err
	}
	if g.Table == "" {
		return fmt.Errorf("%w: empty table name", ErrInvalidGuard)
	}
	tok := g.TokenColumn
	if tok == "" {
		tok = DefaultTokenColumn
	}
	if _, ok := item[tok]; ok {
		return fmt.Errorf("%w: item sets the token attribute %q itself", ErrInvalidGuard, tok)
	}
	full := make(map[string]types.AttributeValue, len(item)+1)
	for k, v := range item {
		full[k] = v
	}
	n := &types.AttributeValueMemberN{Value: strconv.FormatInt(int64(token), 10)}
	full[tok] = n
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(g.Table),
		Item:                      full,
		ConditionExpression:       aws.String(ddbGuard),
		ExpressionAttributeNames:  map[string]string{"#tok": tok},
		ExpressionAttributeValues: map[string]types.AttributeValue{":tok": n},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return fmt.Errorf("%w: token %d", ErrStaleToken, int64(token))
	case err != nil:
		return fmt.Errorf("fenced: guarded put: %w", err)
	}
	return nil
}

// DynamoDBCounter is a Source backed by one DynamoDB item whose number
// attribute is incremented atomically (UpdateItem ADD, ReturnValues
// UPDATED_NEW). The item is created on first use. Create it with
// NewDynamoDBCounter.
type DynamoDBCounter struct {
	db                DynamoDBUpdater
	table, key, value string
	name              string
}

var _ Source = (*DynamoDBCounter)(nil)

// DynamoDBCounterOptions names the counter's attributes; zero fields mean
// DefaultCounterKey and DefaultCounterValue. The table's partition key
// must be a string attribute named Key.
type DynamoDBCounterOptions struct {
	Key, Value string
}

// NewDynamoDBCounter returns a Source that increments the counter item
// whose partition key is name in table. opts may be nil. It returns
// ErrNilHandle for a nil client and ErrInvalidGuard for an empty table or
// name.
func NewDynamoDBCounter(db DynamoDBUpdater, table, name string, opts *DynamoDBCounterOptions) (*DynamoDBCounter, error) {
	if handle.IsNil(db) {
		return nil, ErrNilHandle
	}
	if table == "" || name == "" {
		return nil, fmt.Errorf("%w: empty table or counter name", ErrInvalidGuard)
	}
	c := &DynamoDBCounter{db: db, table: table, name: name, key: DefaultCounterKey, value: DefaultCounterValue}
	if opts != nil && opts.Key != "" {
		c.key = opts.Key
	}
	if opts != nil && opts.Value != "" {
		c.value = opts.Value
	}
	return c, nil
}

// Next adds 1 to the counter and returns the new value. SDK errors are
// wrapped; a response without the attribute is an error; a counter that
// passed math.MaxInt64 is ErrTokenOverflow.
func (c *DynamoDBCounter) Next(ctx context.Context) (Token, error) {
	out, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(c.table),
		Key:                       map[string]types.AttributeValue{c.key: &types.AttributeValueMemberS{Value: c.name}},
		UpdateExpression:          aws.String(ddbAdd),
		ExpressionAttributeNames:  map[string]string{"#v": c.value},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, fmt.Errorf("fenced: counter %s/%s: %w", c.table, c.name, err)
	}
	v, err := numberAttr(out.Attributes, c.value)
	if errors.Is(err, strconv.ErrRange) {
		// DynamoDB numbers have 38 digits: the counter can pass
		// math.MaxInt64, and every token from then on would be unusable.
		return 0, fmt.Errorf("%w: counter %s/%s passed math.MaxInt64: %w", ErrTokenOverflow, c.table, c.name, err)
	}
	if err != nil {
		return 0, fmt.Errorf("fenced: counter %s/%s: %w", c.table, c.name, err)
	}
	return checked(v)
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
