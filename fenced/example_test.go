package fenced_test

import (
	"errors"
	"fmt"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
)

func ExampleToken_Valid() {
	fmt.Println(fenced.Token(42).Valid(), fenced.Token(0).Valid(), fenced.Token(-1).Valid())
	// Output: true false false
}

func ExampleToken_String() {
	fmt.Println(fenced.Token(42))
	// Output: 42
}

func ExampleFence_Table() {
	fmt.Printf("%+v\n", fenced.Fence{}.Table())
	// Output: {Schema: Name:concurkit_fences KeyColumn:resource TokenColumn:max_seen_token VersionColumn:}
}

// The sentinels callers branch on: a refused write, bad input (before any
// I/O), an exhausted token source, a missing row.
func Example_errors() {
	overflow := fmt.Errorf("fencedpg: nextval: %w", fenced.ErrTokenOverflow)
	fmt.Println(errors.Is(overflow, fenced.ErrInvalidToken), errors.Is(overflow, concurkit.ErrInvalidArgument))
	stale := fmt.Errorf("%w: accounts: token 7, storage has seen 8", fenced.ErrStaleToken)
	fmt.Println(errors.Is(stale, fenced.ErrStaleToken), errors.Is(stale, concurkit.ErrInvalidArgument))
	// Output:
	// true true
	// true false
}
