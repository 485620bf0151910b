package dynamoapi

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// PutUpdater is the part of *dynamodb.Client that writes items both ways:
// PutItem (replace) and UpdateItem.
type PutUpdater interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	Updater
}

var _ PutUpdater = (*dynamodb.Client)(nil)
