package fenced_test

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/observe"
)

// TestSentinels: what each sentinel matches, and its stable ErrorType.
// (fencedpg's tests check ErrNotFound against the real pgx.ErrNoRows.)
func TestSentinels(t *testing.T) {
	for _, c := range []struct {
		err     error
		matches []error
		not     []error
		typ     string
	}{
		{fenced.ErrStaleToken, nil, []error{concurkit.ErrInvalidArgument, fenced.ErrNotFound, sql.ErrNoRows}, "stale_token"},
		{fenced.ErrInvalidToken, []error{concurkit.ErrInvalidArgument}, []error{fenced.ErrTokenOverflow, fenced.ErrStaleToken}, "invalid_token"},
		{fenced.ErrTokenOverflow, []error{fenced.ErrInvalidToken, concurkit.ErrInvalidArgument}, []error{fenced.ErrStaleToken}, "invalid_token"},
		{fenced.ErrNotFound, []error{sql.ErrNoRows, fmt.Errorf("driver: %w", sql.ErrNoRows)}, []error{concurkit.ErrInvalidArgument, fenced.ErrStaleToken, errors.New("sql: no rows in result set")}, "not_found"},
	} {
		wrapped := fmt.Errorf("fencedpg: write: %w", c.err)
		for _, target := range append([]error{c.err}, c.matches...) {
			if !errors.Is(wrapped, target) {
				t.Errorf("%v does not match %v", wrapped, target)
			}
		}
		for _, target := range c.not {
			if errors.Is(wrapped, target) {
				t.Errorf("%v matches %v", wrapped, target)
			}
		}
		if got := observe.ErrorType(wrapped); got != c.typ {
			t.Errorf("observe.ErrorType(%v) = %q, want %q", wrapped, got, c.typ)
		}
	}
}

func TestFenceTable(t *testing.T) {
	if got, want := (fenced.Fence{}).Table(), (fenced.Table{Name: "concurkit_fences", KeyColumn: "resource", TokenColumn: "max_seen_token"}); got != want {
		t.Errorf("zero Fence: %+v, want %+v", got, want)
	}
	if got := (fenced.Fence{Schema: "app", Name: "f"}).Table(); got.Schema != "app" || got.Name != "f" || got.KeyColumn != "resource" {
		t.Errorf("named Fence: %+v", got)
	}
}
