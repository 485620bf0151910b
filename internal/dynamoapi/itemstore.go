package dynamoapi

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// UpdateScanDeleter is the part of *dynamodb.Client that keeps items the
// caller expires itself: conditional updates, and scans with conditional
// deletes for reaping (idempotencydynamo's Client).
type UpdateScanDeleter interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

var _ UpdateScanDeleter = (*dynamodb.Client)(nil)
