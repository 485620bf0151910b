package inbox_test

import (
	"errors"
	"fmt"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/inbox"
)

// ValidateID checks an id before any I/O, with the same rule on every
// server: an id one adapter accepts, all accept.
func ExampleValidateID() {
	fmt.Println(inbox.ValidateID("message id", "order-42/created"))
	err := inbox.ValidateID("message id", "")
	fmt.Println(errors.Is(err, inbox.ErrInvalidID), errors.Is(err, concurkit.ErrInvalidArgument))
	// Output:
	// <nil>
	// true true
}

// A gap in a producer's sequences is reported as a *GapError, which
// matches ErrSequenceGap; HandleSequence returns it under RefuseGaps and
// sets SeqResult.Gap under ApplyGaps.
func ExampleGapError() {
	var err error = &inbox.GapError{Consumer: "billing", Producer: "orders-1", From: 4, To: 6}
	var gap *inbox.GapError
	if errors.As(err, &gap) && errors.Is(err, inbox.ErrSequenceGap) {
		fmt.Println("missing", gap.From, "through", gap.To)
	}
	// Output: missing 4 through 6
}

// Duplicate tells a message that was already applied (at or below the
// highest sequence) from one that ran or was refused for a gap.
func ExampleSeqResult_Duplicate() {
	fmt.Println(inbox.SeqResult{Applied: true, Last: 2}.Duplicate())
	fmt.Println(inbox.SeqResult{Last: 7}.Duplicate())
	// Output:
	// false
	// true
}
