package optimistic_test

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/optimistic"
	"github.com/concurkit/concurkit/retry"
)

// TestSentinels: what callers branch on, checked without a server. The
// match with pgx.ErrNoRows is tested from optimisticpg, where pgx is
// imported anyway.
func TestSentinels(t *testing.T) {
	wrapped := fmt.Errorf("repository: %w", optimistic.ErrNotFound)
	if !errors.Is(wrapped, optimistic.ErrNotFound) || !errors.Is(wrapped, sql.ErrNoRows) {
		t.Errorf("ErrNotFound (wrapped) does not match itself and sql.ErrNoRows")
	}
	if errors.Is(optimistic.ErrConflict, sql.ErrNoRows) || errors.Is(optimistic.ErrNotFound, optimistic.ErrConflict) {
		t.Errorf("ErrConflict and ErrNotFound must not match each other or sql.ErrNoRows")
	}
	if !retry.IsRetryable(optimistic.ErrConflict) || retry.IsRetryable(optimistic.ErrNotFound) {
		t.Errorf("retryable: ErrConflict %v, ErrNotFound %v; want true, false",
			retry.IsRetryable(optimistic.ErrConflict), retry.IsRetryable(optimistic.ErrNotFound))
	}
	if !errors.Is(optimistic.ErrVersionOverflow, concurkit.ErrInvalidArgument) {
		t.Errorf("ErrVersionOverflow does not match concurkit.ErrInvalidArgument")
	}
	for err, want := range map[error]string{
		optimistic.ErrConflict:                              "conflict",
		fmt.Errorf("x: %w", optimistic.ErrConflict):         "conflict",
		optimistic.ErrNotFound:                              "not_found",
		&retry.ExhaustedError{Last: optimistic.ErrConflict}: "conflict",
	} {
		if got := observe.ErrorType(err); got != want {
			t.Errorf("observe.ErrorType(%v) = %q; want %q", err, got, want)
		}
	}
	for err, want := range map[error]string{
		optimistic.ErrConflict:        "optimistic: version conflict",
		optimistic.ErrNotFound:        "optimistic: row not found",
		optimistic.ErrVersionOverflow: "optimistic: version overflow: expected version is math.MaxInt64",
	} {
		if err.Error() != want {
			t.Errorf("message %q; want %q", err, want)
		}
	}
}
