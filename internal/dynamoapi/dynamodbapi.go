package dynamoapi

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/internal/handle"
)

// Updater is the part of *dynamodb.Client that runs conditional updates.
type Updater interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ Updater = (*dynamodb.Client)(nil)

// Marshal converts a Go value to an attribute value with
// attributevalue.Marshal (string → S, integers → N, []byte → B, …),
// passing a types.AttributeValue through as is. A nil
// types.AttributeValue (a typed nil pointer) is an error.
func Marshal(v any) (types.AttributeValue, error) {
	if av, ok := v.(types.AttributeValue); ok {
		if handle.IsNil(av) {
			return nil, errors.New("nil attribute value")
		}
		return av, nil
	}
	return attributevalue.Marshal(v)
}
