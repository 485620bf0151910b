// Package wire holds what the idempotency key stores share: the encoding
// of stored headers, the default table name and the wrapping of driver
// errors. It imports only the standard library.
package wire

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// DefaultTable is idempotency.DefaultTable (this package cannot import
// the core, which is its user's business).
const DefaultTable = "concurkit_idempotency_keys"

// Header encodes stored response headers as a JSON object of arrays, one
// element per field value; nil or empty headers encode as {}. A value that
// JSON cannot carry byte for byte — not valid UTF-8 (field values may hold
// obs-text, 0x80-0xFF, RFC 9110 §5.5), or holding a NUL, which PostgreSQL's
// jsonb refuses — is an object {"b64": <standard base64 of its bytes>};
// every other value is a JSON string, as the first version of the format
// wrote all of them, so that stored rows of either version read the same.
func Header(h http.Header) ([]byte, error) {
	if len(h) == 0 {
		return []byte("{}"), nil
	}
	enc := make(map[string][]any, len(h))
	for name, values := range h {
		vs := make([]any, len(values))
		for i, v := range values {
			if utf8.ValidString(v) && strings.IndexByte(v, 0) < 0 {
				vs[i] = v
			} else {
				vs[i] = rawValue{B64: base64.StdEncoding.EncodeToString([]byte(v))}
			}
		}
		enc[name] = vs
	}
	return json.Marshal(enc)
}

// rawValue is a field value stored as its bytes.
type rawValue struct {
	B64 string `json:"b64"`
}

// ParseHeader decodes what Header encoded (nil for empty input).
func ParseHeader(b []byte) (http.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var enc map[string][]json.RawMessage
	if err := json.Unmarshal(b, &enc); err != nil {
		return nil, fmt.Errorf("stored headers: %w", err)
	}
	if enc == nil {
		return nil, nil
	}
	h := make(http.Header, len(enc))
	for name, values := range enc {
		vs := make([]string, len(values))
		for i, raw := range values {
			if err := json.Unmarshal(raw, &vs[i]); err == nil {
				continue
			}
			var r rawValue
			if err := json.Unmarshal(raw, &r); err != nil {
				return nil, fmt.Errorf("stored headers: %s: %w", name, err)
			}
			v, err := base64.StdEncoding.DecodeString(r.B64)
			if err != nil {
				return nil, fmt.Errorf("stored headers: %s: %w", name, err)
			}
			vs[i] = string(v)
		}
		h[name] = vs
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
