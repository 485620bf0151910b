package fenced_test

import (
	"fmt"

	"github.com/concurkit/concurkit/fenced"
)

func ExampleToken_Valid() {
	fmt.Println(fenced.Token(42).Valid(), fenced.Token(0).Valid(), fenced.Token(-1).Valid())
	// Output: true false false
}
