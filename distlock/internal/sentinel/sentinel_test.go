package sentinel_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock/internal/sentinel"
	"github.com/concurkit/concurkit/observe"
)

func TestSentinel(t *testing.T) {
	plain := sentinel.New("pkg: plain", "plain")
	also := sentinel.New("pkg: unknown", "unknown", concurkit.ErrOutcomeUnknown)
	inner := concurkit.InvalidArgumentError("pkg: bad key")
	wrapped := sentinel.Wrap(inner, "bad_key")
	for _, tc := range []struct {
		err     error
		matches []error
		not     []error
		typ     string
	}{
		{plain, []error{plain}, []error{concurkit.ErrInvalidArgument, concurkit.ErrOutcomeUnknown}, "plain"},
		{also, []error{also, concurkit.ErrOutcomeUnknown}, []error{concurkit.ErrInvalidArgument, plain}, "unknown"},
		{wrapped, []error{wrapped, inner, concurkit.ErrInvalidArgument}, []error{concurkit.ErrOutcomeUnknown}, "bad_key"},
	} {
		err := fmt.Errorf("%w: detail", tc.err)
		for _, m := range tc.matches {
			if !errors.Is(err, m) {
				t.Errorf("%v does not match %v", err, m)
			}
		}
		for _, m := range tc.not {
			if errors.Is(err, m) {
				t.Errorf("%v matches %v", err, m)
			}
		}
		if got := observe.ErrorType(err); got != tc.typ {
			t.Errorf("ErrorType(%v) = %q, want %q", err, got, tc.typ)
		}
	}
	if wrapped.Error() != "pkg: bad key" {
		t.Errorf("message %q", wrapped.Error())
	}
}
