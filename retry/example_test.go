package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/retry"
)

// conflict is an error that asks to be retried, as optimistic.ErrConflict does.
type conflict struct{}

func (conflict) Error() string   { return "version conflict" }
func (conflict) Retryable() bool { return true }

func ExampleDo() {
	attempts := 0
	err := retry.Do(context.Background(), retry.Policy{BaseDelay: time.Millisecond}, func(ctx context.Context) error {
		attempts++
		if attempts < 3 {
			return conflict{} // someone else won the race; read again and retry
		}
		return nil
	})
	fmt.Println(err, attempts)
	// Output: <nil> 3
}

// Retries are observed through hooks on the context (package observe):
// one event per retried failure, and one with GaveUp when the budget is
// used up.
func ExampleDo_observe() {
	ctx := observe.WithHooks(context.Background(), &observe.Hooks{
		Retry: func(_ context.Context, e observe.RetryEvent) {
			fmt.Println(e.Package, e.Attempt, e.Err, e.GaveUp)
		},
	})
	err := retry.Do(ctx, retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond}, func(ctx context.Context) error {
		return conflict{}
	})
	fmt.Println(err)
	// Output:
	// retry 1 version conflict false
	// retry 2 version conflict false
	// retry 3 version conflict true
	// retry: gave up after 3 attempts: version conflict
}

func ExampleExhaustedError() {
	err := retry.Do(context.Background(), retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}, func(ctx context.Context) error {
		return conflict{}
	})
	var ex *retry.ExhaustedError
	if errors.As(err, &ex) {
		fmt.Println(ex.Attempts, errors.Is(err, retry.ErrExhausted), errors.Is(err, conflict{}))
	}
	// Output: 2 true true
}

func ExampleIsRetryable() {
	fmt.Println(retry.IsRetryable(conflict{}), retry.IsRetryable(errors.New("syntax error")), retry.IsRetryable(context.Canceled))
	// Output: true false false
}

func ExamplePolicy_Backoff() {
	p := retry.Policy{BaseDelay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond}
	d := p.Backoff(5) // full jitter: uniform in [0, min(40ms, 10ms·2⁴)]
	fmt.Println(d >= 0 && d <= 40*time.Millisecond)
	// Output: true
}

func ExamplePolicy_Validate() {
	err := retry.Policy{MaxAttempts: -1}.Validate()
	fmt.Println(err)
	fmt.Println(errors.Is(err, concurkit.ErrInvalidArgument))
	// Output:
	// retry: invalid policy: MaxAttempts -1 < 0
	// true
}
