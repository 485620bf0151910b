package fencedmysql

import (
	"context"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/internal/guard"
	"github.com/concurkit/concurkit/internal/handle"
)

// Admit is fencedpg.Admit for MySQL/MariaDB (Write on the fence row), with
// the same arguments and results. Its "unchanged" check is a locking read,
// so it also refuses a stale token inside a REPEATABLE READ transaction
// whose snapshot predates the successor's token.
func Admit(ctx context.Context, tx DBTX, f fenced.Fence, resource string, token fenced.Token) error {
	if handle.IsNil(tx) {
		return guard.Invalid(pkg, "nil tx")
	}
	if resource == "" {
		return guard.Invalid(pkg, "empty resource")
	}
	st, err := prepare(&writes, buildWrite, tx, f.Table(), resource, token, nil)
	if err != nil {
		return err
	}
	return write(ctx, tx, st, resource, token, nil, resource)
}
