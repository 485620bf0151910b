// Package wire holds what the idempotency key stores share: the encoding
// of stored headers, the default table name and the wrapping of driver
// errors. It imports only the standard library.
package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// DefaultTable is idempotency.DefaultTable (this package cannot import
// the core, which is its user's business).
const DefaultTable = "concurkit_idempotency_keys"

// Header encodes stored response headers as a JSON object; nil or empty
// headers encode as {}.
func Header(h http.Header) ([]byte, error) {
	if len(h) == 0 {
		return []byte("{}"), nil
	}
	return json.Marshal(h)
}

// ParseHeader decodes what Header encoded (nil for empty input).
func ParseHeader(b []byte) (http.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h http.Header
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("stored headers: %w", err)
	}
	return h, nil
}

// Err wraps a driver error of operation op as "pkg: op: err", joined with
// ctx.Err() when ctx has ended and err does not already match it, so that
// cancellation is never hidden.
func Err(ctx context.Context, pkg, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, cerr)
	}
	return fmt.Errorf("%s: %s: %w", pkg, op, err)
}
