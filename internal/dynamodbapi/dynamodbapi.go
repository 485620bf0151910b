package dynamodbapi

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Updater is the part of *dynamodb.Client that runs conditional updates.
type Updater interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ Updater = (*dynamodb.Client)(nil)
