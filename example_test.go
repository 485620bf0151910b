package concurkit_test

import (
	"errors"
	"fmt"

	"github.com/concurkit/concurkit"
)

// A package defines its specific bad-input sentinel once; callers can test
// for it or for the module-wide one.
func ExampleInvalidArgumentError() {
	errInvalidKey := concurkit.InvalidArgumentError("mypkg: invalid key")
	err := fmt.Errorf("%w: empty key", errInvalidKey)
	fmt.Println(err)
	fmt.Println(errors.Is(err, errInvalidKey), errors.Is(err, concurkit.ErrInvalidArgument))
	// Output:
	// mypkg: invalid key: empty key
	// true true
}
