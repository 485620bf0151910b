package idempotencydynamo_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencydynamo"
)

func TestNewBadInput(t *testing.T) {
	if _, err := idempotencydynamo.New(nil, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("nil client: %v", err)
	}
	if _, err := idempotencydynamo.New((*dynamodb.Client)(nil), nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("typed nil client: %v", err)
	}
	if _, err := idempotencydynamo.New(&dynamodb.Client{}, &idempotencydynamo.Config{Table: idempotency.Table{Name: "a b"}}); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("bad table: %v", err)
	}
	if err := idempotencydynamo.CreateTable(t.Context(), (*dynamodb.Client)(nil), ""); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("CreateTable nil client: %v", err)
	}
}
