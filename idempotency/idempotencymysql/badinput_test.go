package idempotencymysql_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencymysql"
)

func TestNewBadInput(t *testing.T) {
	for name, c := range map[string]struct {
		db  idempotencymysql.DBTX
		cfg *idempotencymysql.Config
	}{
		"nil db":       {nil, nil},
		"typed nil db": {(*sql.DB)(nil), nil},
		"long table":   {&sql.DB{}, &idempotencymysql.Config{Table: idempotency.Table{Name: string(make([]byte, 65))}}},
	} {
		if _, err := idempotencymysql.New(c.db, c.cfg); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}
