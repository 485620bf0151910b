package fencedpg_test

import (
	"errors"
	"math"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
)

// TestSequenceAtItsLimit: the sequence mints its largest token, then
// refuses with ErrTokenOverflow (an ErrInvalidToken) instead of handing
// out something that is not a valid Token.
func TestSequenceAtItsLimit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg := pgPool(t)
	if err := fencedpg.CreateSequence(ctx, pg); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Exec(ctx, "SELECT setval('concurkit_fence_token_seq', 9223372036854775806)"); err != nil {
		t.Fatal(err)
	}
	src, err := fencedpg.NewSequence(pg)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := src.Next(ctx); err != nil || tok != math.MaxInt64 {
		t.Fatalf("last token = %d, %v; want %d", tok, err, int64(math.MaxInt64))
	}
	for range 2 {
		tok, err := src.Next(ctx)
		if !errors.Is(err, fenced.ErrTokenOverflow) || !errors.Is(err, fenced.ErrInvalidToken) || !errors.Is(err, concurkit.ErrInvalidArgument) || tok != 0 {
			t.Fatalf("past the limit: %d, %v; want ErrTokenOverflow", tok, err)
		}
	}
}
