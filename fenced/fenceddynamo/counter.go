package fenceddynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/internal/guard"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
)

// DefaultCounterKey and DefaultCounterValue are the attribute names of a
// Counter's item: a string partition key and a number.
const (
	DefaultCounterKey   = "pk"
	DefaultCounterValue = "token"
)

const ddbAdd = "ADD #v :one"

// Counter is a fenced.Source backed by one DynamoDB item whose number
// attribute is incremented atomically (UpdateItem ADD, ReturnValues
// UPDATED_NEW). The item is created on first use. Create it with
// NewCounter.
type Counter struct {
	db                Client
	table, key, value string
	name              string
}

var _ fenced.Source = (*Counter)(nil)

// CounterOptions names the counter's attributes; zero fields mean
// DefaultCounterKey and DefaultCounterValue. The table's partition key
// must be a string attribute named KeyColumn.
type CounterOptions struct {
	// KeyColumn is the partition-key attribute. Default DefaultCounterKey.
	KeyColumn string
	// ValueColumn is the number attribute incremented. Default
	// DefaultCounterValue.
	ValueColumn string
}

// NewCounter returns a Source that increments the counter item whose
// partition key is name in table. opts may be nil (the defaults). It does
// not touch the table. Errors match concurkit.ErrInvalidArgument: a nil
// client, an invalid table or attribute name, an empty name.
func NewCounter(db Client, table, name string, opts *CounterOptions) (*Counter, error) {
	if handle.IsNil(db) {
		return nil, guard.Invalid(pkg, "nil client")
	}
	if err := ident.DynamoDBTable(table); err != nil {
		return nil, guard.Invalid(pkg, "counter table: %v", err)
	}
	if name == "" {
		return nil, guard.Invalid(pkg, "empty counter name")
	}
	c := &Counter{db: db, table: table, name: name, key: DefaultCounterKey, value: DefaultCounterValue}
	if opts != nil && opts.KeyColumn != "" {
		c.key = opts.KeyColumn
	}
	if opts != nil && opts.ValueColumn != "" {
		c.value = opts.ValueColumn
	}
	for _, a := range []string{c.key, c.value} {
		if err := ident.DynamoDBAttribute(a); err != nil {
			return nil, guard.Invalid(pkg, "counter attribute: %v", err)
		}
	}
	return c, nil
}

// Next adds 1 to the counter and returns the new value. SDK errors are
// wrapped; a response without the attribute is an error; a counter that
// passed math.MaxInt64 is fenced.ErrTokenOverflow. A nil *Counter is an
// error matching concurkit.ErrInvalidArgument.
func (c *Counter) Next(ctx context.Context) (fenced.Token, error) {
	if c == nil {
		return 0, guard.Invalid(pkg, "nil Counter")
	}
	out, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(c.table),
		Key:                       map[string]types.AttributeValue{c.key: &types.AttributeValueMemberS{Value: c.name}},
		UpdateExpression:          aws.String(ddbAdd),
		ExpressionAttributeNames:  map[string]string{"#v": c.value},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, guard.DriverError(ctx, pkg, "counter "+c.table+"/"+c.name, err)
	}
	v, err := numberAttr(out.Attributes, c.value)
	if errors.Is(err, strconv.ErrRange) {
		// DynamoDB numbers have 38 digits: the counter can pass
		// math.MaxInt64, and every token from then on would be unusable.
		return 0, fmt.Errorf("%w: counter %s/%s passed math.MaxInt64: %w", fenced.ErrTokenOverflow, c.table, c.name, err)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: counter %s/%s: %w", pkg, c.table, c.name, err)
	}
	return guard.Checked(v)
}
