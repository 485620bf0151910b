package durability_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/concurkit/concurkit/durability"
)

func TestError(t *testing.T) {
	if err := durability.Result("postgresql", nil); err != nil {
		t.Fatalf("Result with no problem = %v, want nil", err)
	}
	err := fmt.Errorf("start-up: %w", durability.Result("postgresql", []durability.Problem{
		{Setting: "synchronous_commit", Value: "off", Want: "on", Loss: durability.Crash, Detail: "d1"},
		{Setting: "standby s2", Value: "async", Want: "sync", Loss: durability.Failover, Detail: "d2"},
	}))
	if !errors.Is(err, durability.ErrNotDurable) {
		t.Fatal("the *Error does not match ErrNotDurable")
	}
	var de *durability.Error
	if !errors.As(err, &de) || !de.Has(durability.Crash) || !de.Has(durability.Failover) || de.Has(durability.NotWritable) {
		t.Fatalf("Has: %v", err)
	}
	want := "start-up: durability: postgresql may lose acknowledged commits: crash: synchronous_commit = off (want on): d1; failover: standby s2 = async (want sync): d2"
	if err.Error() != want {
		t.Errorf("message\n got %q\nwant %q", err, want)
	}
	if s := durability.Loss(0).String(); s != "unknown" {
		t.Errorf("Loss(0) = %q", s)
	}
}

// A service decides at start-up what a problem means to it: here a
// failover risk is logged and accepted, a crash risk is not.
func ExampleError_Has() {
	err := durability.Result("postgresql", []durability.Problem{{
		Setting: "standby replica2", Value: "async", Want: "sync", Loss: durability.Failover,
		Detail: "the standby streams asynchronously: promoting it loses the commits it had not received",
	}})
	var de *durability.Error
	if errors.As(err, &de) && !de.Has(durability.Crash) && !de.Has(durability.NotWritable) {
		fmt.Println("accepted:", de.Problems[0])
	}
	// Output: accepted: failover: standby replica2 = async (want sync): the standby streams asynchronously: promoting it loses the commits it had not received
}
