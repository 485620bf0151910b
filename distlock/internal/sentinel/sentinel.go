// Package sentinel makes the sentinel errors of package distlock and its
// backends: an error with a fixed message, a stable ErrorType name for
// observe.ErrorType (metrics attributes), and optionally further sentinels
// it matches with errors.Is (concurkit.ErrInvalidArgument,
// concurkit.ErrOutcomeUnknown).
package sentinel

// Error is a sentinel error. Compare it with errors.Is.
type Error struct {
	msg, typ string
	inner    error   // unwrapped to (e.g. a concurkit.InvalidArgumentError)
	also     []error // further targets Is reports true for
}

// New returns a sentinel with message msg and ErrorType typ that also
// matches each of also with errors.Is.
func New(msg, typ string, also ...error) *Error {
	return &Error{msg: msg, typ: typ, also: also}
}

// Wrap returns a sentinel with inner's message and ErrorType typ that
// unwraps to inner, so it matches whatever inner matches (a sentinel made
// with concurkit.InvalidArgumentError, say).
func Wrap(inner error, typ string) *Error {
	return &Error{msg: inner.Error(), typ: typ, inner: inner}
}

// Error returns the message.
func (e *Error) Error() string { return e.msg }

// ErrorType returns the stable, low-cardinality name of the error.
func (e *Error) ErrorType() string { return e.typ }

// Unwrap returns the wrapped sentinel, if any.
func (e *Error) Unwrap() error { return e.inner }

// Is reports whether target is one of the sentinels e also matches.
func (e *Error) Is(target error) bool {
	for _, a := range e.also {
		if a == target {
			return true
		}
	}
	return false
}
