package dynamoapi

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// PutUpdater is the part of *dynamodb.Client that writes items both ways:
// conditional puts and updates (upsertdynamo's Client).
type PutUpdater interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ PutUpdater = (*dynamodb.Client)(nil)
