package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/idempotency"
)

// unused is a Store for argument checks that must fail before any I/O.
type unused struct{}

func (unused) Claim(context.Context, idempotency.ClaimRequest) (idempotency.Record, error) {
	panic("I/O before validation")
}

func (unused) Complete(context.Context, idempotency.Lock, idempotency.Response, time.Time) error {
	panic("I/O before validation")
}
func (unused) Release(context.Context, idempotency.Lock) error { panic("I/O before validation") }
func (unused) Reap(context.Context, time.Time, int) (int, error) {
	panic("I/O before validation")
}

func TestMiddlewareConfig(t *testing.T) {
	var typedNil *struct{ idempotency.Store }
	for name, c := range map[string]struct {
		s   idempotency.Store
		cfg *idempotency.Config
	}{
		"nil store":                  {nil, nil},
		"typed nil store":            {typedNil, nil},
		"TTL below LockTimeout":      {unused{}, &idempotency.Config{TTL: time.Minute, LockTimeout: time.Hour}},
		"TTL equal to LockTimeout":   {unused{}, &idempotency.Config{TTL: time.Minute, LockTimeout: time.Minute}},
		"negative TTL":               {unused{}, &idempotency.Config{TTL: -time.Hour}},
		"negative LockTimeout":       {unused{}, &idempotency.Config{LockTimeout: -1}},
		"bad header name":            {unused{}, &idempotency.Config{Header: "Idempotency Key"}},
		"bad response header":        {unused{}, &idempotency.Config{Headers: []string{"Location", "a:b"}}},
		"negative MaxKeyLength":      {unused{}, &idempotency.Config{MaxKeyLength: -1}},
		"negative MaxBodyBytes":      {unused{}, &idempotency.Config{MaxBodyBytes: -1}},
		"negative MaxResponseBytes":  {unused{}, &idempotency.Config{MaxResponseBytes: -1}},
		"TTL below default lock 90s": {unused{}, &idempotency.Config{TTL: time.Minute}},
	} {
		if _, err := idempotency.Middleware(c.s, c.cfg); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := idempotency.Middleware(unused{}, &idempotency.Config{Header: "X-Request-Key", Methods: []string{http.MethodPut}}); err != nil {
		t.Fatal(err)
	}
}

func TestReapBadInput(t *testing.T) {
	ctx := t.Context()
	if _, err := idempotency.Reap(ctx, nil, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("nil store: %v", err)
	}
	if _, err := idempotency.Reap(ctx, unused{}, &idempotency.ReapOptions{MaxBatches: -1}); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("negative MaxBatches: %v", err)
	}
}

func TestDoBadInput(t *testing.T) {
	ctx := t.Context()
	fn := func(context.Context) (int, error) { return 1, nil }
	if _, _, err := idempotency.Do[int](ctx, unused{}, "", "k", nil, nil, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("nil fn: %v", err)
	}
	for _, key := range []string{"", "k\x00", string(make([]byte, 256))} {
		if _, _, err := idempotency.Do(ctx, unused{}, "", key, nil, nil, fn); !errors.Is(err, idempotency.ErrInvalidKey) {
			t.Errorf("key %q: %v, want ErrInvalidKey", key, err)
		}
	}
	for _, p := range []string{"\xff", "a\x00b", string(make([]byte, 256))} {
		if _, _, err := idempotency.Do(ctx, unused{}, p, "k", nil, nil, fn); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("principal %q: %v", p, err)
		}
	}
}

// txUnused is a TxStore for argument checks that must fail before any I/O.
type txUnused struct{ unused }

func (txUnused) Advance(context.Context, idempotency.Lock, string, time.Time, time.Time, func(context.Context, struct{}) (*idempotency.Response, error)) error {
	panic("I/O before validation")
}

// TestDerivedKeysInjective: Step.DerivedKey is "<key>:<phase>", and keys
// may contain ':'; a phase name with ':' would let two different (key,
// phase) pairs share a derived key — ("order", "1:charge") and
// ("order:1", "charge") — so that one operation's call to an outside
// service replays another's. DoPhases refuses such names before any I/O;
// names without ':' keep their derived keys unchanged and injective.
func TestDerivedKeysInjective(t *testing.T) {
	ctx := t.Context()
	finish := func(context.Context, struct{}, idempotency.Step) (int, error) { return 1, nil }
	run := func(context.Context, struct{}, idempotency.Step) error { return nil }
	for _, name := range []string{"1:charge", ":", "charge:", ":charge"} {
		_, _, err := idempotency.DoPhases(ctx, txUnused{}, "", "order", nil, nil, []idempotency.Phase[struct{}]{{Name: name, Run: run}}, finish)
		if !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("phase %q: %v, want ErrInvalidArgument", name, err)
		}
	}
	a := idempotency.Step{Key: "order:1", Phase: "charge"}
	b := idempotency.Step{Key: "order", Phase: "1:charge"} // refused above
	if a.DerivedKey() != "order:1:charge" || a.DerivedKey() != b.DerivedKey() {
		t.Fatalf("derived keys %q and %q: the format changed", a.DerivedKey(), b.DerivedKey())
	}
}
