package concurkit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/concurkit/concurkit"
)

func TestInvalidArgumentError(t *testing.T) {
	a := concurkit.InvalidArgumentError("pkg: invalid key")
	b := concurkit.InvalidArgumentError("pkg: invalid key")
	wrapped := fmt.Errorf("%w: empty", a)
	for _, tc := range []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"matches the module sentinel", a, concurkit.ErrInvalidArgument, true},
		{"matches itself", a, a, true},
		{"wrapped matches the module sentinel", wrapped, concurkit.ErrInvalidArgument, true},
		{"wrapped matches itself", wrapped, a, true},
		{"two sentinels with one message stay distinct", a, b, false},
		{"the module sentinel is not the specific one", concurkit.ErrInvalidArgument, a, false},
		{"not outcome unknown", a, concurkit.ErrOutcomeUnknown, false},
	} {
		if got := errors.Is(tc.err, tc.target); got != tc.want {
			t.Errorf("%s: errors.Is = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := wrapped.Error(); got != "pkg: invalid key: empty" {
		t.Errorf("message %q", got)
	}
}

func TestAmbiguousCommitError(t *testing.T) {
	err := fmt.Errorf("op: %w", &concurkit.AmbiguousCommitError{Err: context.Canceled})
	if !errors.Is(err, concurkit.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("%v: does not match ErrOutcomeUnknown and context.Canceled", err)
	}
	if errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatal("matches ErrInvalidArgument")
	}
	var ae *concurkit.AmbiguousCommitError
	if !errors.As(err, &ae) || ae.Err != context.Canceled {
		t.Fatalf("errors.As: %v", ae)
	}
	if got := (&concurkit.AmbiguousCommitError{}).Error(); got != "concurkit: commit outcome unknown" {
		t.Fatalf("nil cause: %q", got)
	}
}

func TestErrorTypes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{concurkit.ErrInvalidArgument, "invalid_argument"},
		{fmt.Errorf("%w: empty", concurkit.ErrInvalidArgument), "invalid_argument"},
		{concurkit.InvalidArgumentError("pkg: bad key"), "invalid_argument"},
		{concurkit.ErrOutcomeUnknown, "outcome_unknown"},
		{&concurkit.AmbiguousCommitError{Err: context.Canceled}, "outcome_unknown"},
	} {
		var typed interface{ ErrorType() string }
		if !errors.As(tc.err, &typed) || typed.ErrorType() != tc.want {
			t.Errorf("%v: ErrorType %v, want %q", tc.err, typed, tc.want)
		}
	}
}
