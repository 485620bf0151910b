package pessimistic_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/pessimistic"
)

func ExampleLock_Validate() {
	fmt.Println(pessimistic.Lock{Wait: pessimistic.SkipLocked}.Validate())
	err := pessimistic.Lock{Wait: pessimistic.NoWait, Timeout: time.Second}.Validate()
	fmt.Println(err)
	fmt.Println(errors.Is(err, concurkit.ErrInvalidArgument))
	// Output:
	// <nil>
	// pessimistic: invalid argument: Timeout 1s set with wait policy NoWait (use WaitTimeout)
	// true
}

func ExampleAdvisoryKey() {
	fmt.Println(pessimistic.AdvisoryKey("invoice-run/2026-11"))
	fmt.Println(pessimistic.AdvisoryKey("") == -3750763034362895579) // the FNV-1a offset basis
	// Output:
	// 719251178613877432
	// true
}

// The adapters wrap the driver's error in a sentinel, so callers branch
// with errors.Is, and metrics name it with observe.ErrorType.
func ExampleErrDeadlock() {
	err := fmt.Errorf("%w: %w", pessimistic.ErrDeadlock, errors.New("ERROR: deadlock detected (SQLSTATE 40P01)"))
	fmt.Println(errors.Is(err, pessimistic.ErrDeadlock), observe.ErrorType(err))
	// Output:
	// true deadlock
}
