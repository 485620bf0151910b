package handle_test

import (
	"database/sql"
	"testing"

	"github.com/concurkit/concurkit/internal/handle"
)

func TestIsNil(t *testing.T) {
	var db *sql.DB
	var q interface{ Close() error } = db
	var fn func()
	var m map[string]int
	for _, tc := range []struct {
		name string
		h    any
		want bool
	}{
		{"untyped nil", nil, true},
		{"typed nil pointer", db, true},
		{"interface holding nil pointer", q, true},
		{"nil func", fn, true},
		{"nil map", m, true},
		{"non-nil pointer", &sql.DB{}, false},
		{"value", 42, false},
		{"empty struct", struct{}{}, false},
	} {
		if got := handle.IsNil(tc.h); got != tc.want {
			t.Errorf("%s: IsNil = %v, want %v", tc.name, got, tc.want)
		}
	}
}
