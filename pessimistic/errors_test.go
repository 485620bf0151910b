package pessimistic_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/retry"
)

// TestSentinels: stable ErrorType names, retryability, messages.
func TestSentinels(t *testing.T) {
	for _, tc := range []struct {
		err       error
		typ       string
		retryable bool
	}{
		{pessimistic.ErrLockNotAvailable, "lock_not_available", false},
		{pessimistic.ErrLockTimeout, "lock_timeout", false},
		{pessimistic.ErrDeadlock, "deadlock", true},
		{pessimistic.ErrSerialization, "serialization", true},
		{pessimistic.ErrNotHeld, "not_held", false},
	} {
		if got := observe.ErrorType(tc.err); got != tc.typ {
			t.Errorf("ErrorType(%v) = %q, want %q", tc.err, got, tc.typ)
		}
		if got := retry.IsRetryable(tc.err); got != tc.retryable {
			t.Errorf("IsRetryable(%v) = %v", tc.err, got)
		}
		if !strings.HasPrefix(tc.err.Error(), "pessimistic: ") {
			t.Errorf("message %q", tc.err)
		}
		if errors.Is(tc.err, concurkit.ErrInvalidArgument) || errors.Is(tc.err, concurkit.ErrOutcomeUnknown) {
			t.Errorf("%v matches a module sentinel", tc.err)
		}
	}
}

// TestLockValidate: every invalid Lock is bad input, before any driver.
func TestLockValidate(t *testing.T) {
	for _, tc := range []struct {
		lock pessimistic.Lock
		ok   bool
	}{
		{pessimistic.Lock{}, true},
		{pessimistic.Lock{Strength: pessimistic.ForShare, Wait: pessimistic.SkipLocked}, true},
		{pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: time.Nanosecond}, true},
		{pessimistic.Lock{Strength: 3}, false},
		{pessimistic.Lock{Wait: 4}, false},
		{pessimistic.Lock{Wait: pessimistic.WaitTimeout}, false},
		{pessimistic.Lock{Wait: pessimistic.WaitTimeout, Timeout: -1}, false},
		{pessimistic.Lock{Wait: pessimistic.NoWait, Timeout: time.Second}, false},
	} {
		err := tc.lock.Validate()
		if (err == nil) != tc.ok || err != nil && (!errors.Is(err, concurkit.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "pessimistic: invalid argument: ")) {
			t.Errorf("%+v: %v", tc.lock, err)
		}
	}
	if s := pessimistic.Strength(9).String(); s != "Strength(9)" {
		t.Errorf("%q", s)
	}
	if s := pessimistic.WaitPolicy(9).String(); s != "WaitPolicy(9)" {
		t.Errorf("%q", s)
	}
}
