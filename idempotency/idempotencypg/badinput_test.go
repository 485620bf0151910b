package idempotencypg_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencypg"
)

func TestNewBadInput(t *testing.T) {
	for name, c := range map[string]struct {
		db  idempotencypg.DBTX
		cfg *idempotencypg.Config
	}{
		"nil db":       {nil, nil},
		"typed nil db": {(*pgxpool.Pool)(nil), nil},
		"long table":   {&pgxpool.Pool{}, &idempotencypg.Config{Table: idempotency.Table{Name: string(make([]byte, 64))}}},
		"NUL in table": {&pgxpool.Pool{}, &idempotencypg.Config{Table: idempotency.Table{Schema: "a\x00"}}},
	} {
		if _, err := idempotencypg.New(c.db, c.cfg); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}
