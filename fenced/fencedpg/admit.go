package fencedpg

import (
	"context"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/internal/guard"
	"github.com/concurkit/concurkit/internal/handle"
)

// Admit checks token against the row of resource in the fence table f (the
// zero Fence is fenced.DefaultFenceTable) and advances it, inside the
// caller's transaction tx. Run the guarded side effect (a write elsewhere,
// a message, a call) only after the transaction that admitted the token
// commits: the fence row stays locked until then, so a concurrent holder
// with a higher token waits and a lower one fails.
//
// It returns nil when token ≥ every token admitted before for resource (an
// equal token passes) and fenced.ErrStaleToken otherwise (reported to
// observe.Hooks.FenceRejected with Resource set to resource). Before any
// I/O: fenced.ErrInvalidToken for token ≤ 0 and errors matching
// concurkit.ErrInvalidArgument for a nil tx, an empty resource or bad
// names in f. Driver errors are wrapped.
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
