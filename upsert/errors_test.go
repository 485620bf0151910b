package upsert_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/upsert"
)

func TestErrContended(t *testing.T) {
	err := fmt.Errorf("%w: profiles after %d attempts", upsert.ErrContended, upsert.MaxReadAttempts)
	if !errors.Is(err, upsert.ErrContended) {
		t.Errorf("wrapped ErrContended does not match it")
	}
	if got := observe.ErrorType(err); got != "contended" {
		t.Errorf("observe.ErrorType = %q; want contended", got)
	}
	if retry.IsRetryable(upsert.ErrContended) {
		t.Errorf("ErrContended is retryable")
	}
	if got, want := upsert.ErrContended.Error(), "upsert: conflicting row kept disappearing"; got != want {
		t.Errorf("message %q; want %q", got, want)
	}
}
