package fencedmysql_test

import (
	"errors"
	"math"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedmysql"
)

// TestSequenceAtItsLimit: the sequence mints its largest token, then
// refuses with ErrTokenOverflow (an ErrInvalidToken) instead of handing
// out something that is not a valid Token. A signed MariaDB SEQUENCE stops
// at its default MAXVALUE, math.MaxInt64-1.
func TestSequenceAtItsLimit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	my := myDB(t)
	if err := fencedmysql.CreateSequence(ctx, my); err != nil {
		t.Fatal(err)
	}
	if _, err := my.ExecContext(ctx, "SELECT SETVAL(concurkit_fence_token_seq, 9223372036854775805)"); err != nil {
		t.Fatal(err)
	}
	src, err := fencedmysql.NewSequence(my)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := src.Next(ctx); err != nil || tok != math.MaxInt64-1 {
		t.Fatalf("last token = %d, %v; want %d", tok, err, int64(math.MaxInt64-1))
	}
	for range 2 {
		tok, err := src.Next(ctx)
		if !errors.Is(err, fenced.ErrTokenOverflow) || !errors.Is(err, fenced.ErrInvalidToken) || !errors.Is(err, concurkit.ErrInvalidArgument) || tok != 0 {
			t.Fatalf("past the limit: %d, %v; want ErrTokenOverflow", tok, err)
		}
	}
}
