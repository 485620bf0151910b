package sqlerr

import "github.com/concurkit/concurkit"

// AmbiguousCommitError is concurkit.AmbiguousCommitError, the module's one
// "outcome unknown" type.
type AmbiguousCommitError = concurkit.AmbiguousCommitError
