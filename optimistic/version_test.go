package optimistic_test

import (
	"errors"
	"math"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/optimistic"
)

// TestVersionLimits: every adapter refuses the same versions the same way.
// math.MaxInt64 has no successor: ErrVersionOverflow (an
// ErrInvalidArgument) before any I/O, the row untouched — PostgreSQL and
// MariaDB would raise an out-of-range error, and Go arithmetic would wrap
// DynamoDB's next version to math.MinInt64. 0 and negative expected
// versions are invalid.
func TestVersionLimits(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t, "inventory", "stock")
			ctx := t.Context()
			s.insert(t, 1, 10)

			s.setVersion(t, 1, math.MaxInt64)
			v, err := s.update(ctx, int64(1), math.MaxInt64, map[string]any{"stock": 9})
			if !errors.Is(err, optimistic.ErrVersionOverflow) || !errors.Is(err, concurkit.ErrInvalidArgument) || v != 0 {
				t.Fatalf("update at math.MaxInt64 = %d, %v; want ErrVersionOverflow (an ErrInvalidArgument)", v, err)
			}
			if val, ver, err := s.read(ctx, 1); err != nil || val != 10 || ver != math.MaxInt64 {
				t.Fatalf("after the refused update: stock %d version %d (%v); want 10, math.MaxInt64", val, ver, err)
			}
			if _, err := s.update(ctx, int64(1), math.MaxInt64-1, nil); !errors.Is(err, optimistic.ErrConflict) {
				t.Fatalf("update at math.MaxInt64-1 of a row at math.MaxInt64 = %v; want ErrConflict", err)
			}
			for _, bad := range []int64{0, -1, math.MinInt64} {
				if _, err := s.update(ctx, int64(1), bad, nil); !errors.Is(err, concurkit.ErrInvalidArgument) || errors.Is(err, optimistic.ErrVersionOverflow) {
					t.Fatalf("expected version %d: %v; want ErrInvalidArgument", bad, err)
				}
			}

			// The largest version that can still be incremented.
			s.setVersion(t, 1, math.MaxInt64-1)
			if v, err := s.update(ctx, int64(1), math.MaxInt64-1, map[string]any{"stock": 8}); err != nil || v != math.MaxInt64 {
				t.Fatalf("update at math.MaxInt64-1 = %d, %v; want math.MaxInt64", v, err)
			}
		})
	}
}

// TestStoredVersionZeroConflicts: a row whose stored version is 0 (or
// negative) exists, so a CAS on it can only conflict. MySQL's former
// outcome encoding (-version in LAST_INSERT_ID) reported version 0 as not
// found.
func TestStoredVersionZeroConflicts(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t, "inventory", "stock")
			ctx := t.Context()
			s.insert(t, 1, 8)
			for _, stored := range []int64{0, -7} {
				s.setVersion(t, 1, stored)
				if _, err := s.update(ctx, int64(1), 1, map[string]any{"stock": 1}); !errors.Is(err, optimistic.ErrConflict) || errors.Is(err, optimistic.ErrNotFound) {
					t.Fatalf("update at 1 of a row stored at version %d = %v; want ErrConflict", stored, err)
				}
				if val, ver, _ := s.read(ctx, 1); val != 8 || ver != stored {
					t.Fatalf("after the conflict: stock %d version %d; want 8, %d", val, ver, stored)
				}
			}
		})
	}
}
