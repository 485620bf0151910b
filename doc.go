// Package concurkit holds what every concurkit package shares: the one
// bad-input sentinel (ErrInvalidArgument) and the one "outcome unknown"
// sentinel (ErrOutcomeUnknown). It imports only the standard library.
//
// The toolkit itself lives in the subpackages; see the README for which
// tool fits which problem.
package concurkit
