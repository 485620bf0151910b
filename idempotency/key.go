package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ParseKey returns the key carried by an Idempotency-Key field value. The
// IETF draft (draft-ietf-httpapi-idempotency-key-header) defines the field
// as a Structured Field Item whose value is an sf-string (RFC 8941
// §3.3.3), e.g. "8e03978e-40d5-43e8-bc93-6894a57f9324" with the quotes;
// many clients send the bare value instead. ParseKey accepts both:
//
//   - quoted: a double quote, characters from printable ASCII (%x20-7E;
//     \" and \\ are the only escapes), a closing double quote, nothing
//     after it (Structured Field parameters are not accepted);
//   - bare: visible ASCII (%x21-7E) except the double quote and the
//     backslash, so no spaces.
//
// Both forms denote the same key: "abc" and abc are one key. Whitespace
// around the value is ignored. The key (unquoted) must be 1 to maxLen
// bytes; maxLen ≤ 0 means DefaultMaxKeyLength. Errors match ErrInvalidKey
// (and concurkit.ErrInvalidArgument) and never quote more than a short
// prefix of the value.
func ParseKey(value string, maxLen int) (string, error) {
	if maxLen <= 0 {
		maxLen = DefaultMaxKeyLength
	}
	v := strings.Trim(value, " \t")
	// A quoted key of maxLen bytes takes at most 2*maxLen+2 bytes: refuse
	// longer values before looking at them.
	if len(v) > 2*maxLen+2 {
		return "", badKey("%d bytes, more than %d", len(v), maxLen)
	}
	var key string
	if strings.HasPrefix(v, `"`) {
		var b strings.Builder
		i := 1
		for ; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '\\':
				i++
				if i == len(v) || (v[i] != '"' && v[i] != '\\') {
					return "", badKey("bad escape in quoted string")
				}
				b.WriteByte(v[i])
				continue
			case c == '"':
			case c < 0x20 || c > 0x7e:
				return "", badKey("byte %#02x at offset %d is not printable ASCII", c, i)
			default:
				b.WriteByte(c)
				continue
			}
			break // closing quote
		}
		if i >= len(v) {
			return "", badKey("quoted string not closed")
		}
		if i != len(v)-1 {
			return "", badKey("characters after the closing quote (parameters are not supported)")
		}
		key = b.String()
	} else {
		for i := 0; i < len(v); i++ {
			if c := v[i]; c <= 0x20 || c > 0x7e || c == '"' || c == '\\' {
				return "", badKey("byte %#02x at offset %d is not allowed in a bare key (quote the key as an sf-string)", c, i)
			}
		}
		key = v
	}
	if err := checkKey(key, maxLen); err != nil {
		return "", err
	}
	return key, nil
}

// FormatKey returns key as the sf-string the draft specifies, quoted and
// escaped: the value a client sends in the Idempotency-Key field.
func FormatKey(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if c := key[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}

// checkKey validates a key given directly (Do, DoPhases) or parsed: 1 to
// maxLen bytes of printable ASCII (%x20-7E).
func checkKey(key string, maxLen int) error {
	if key == "" {
		return badKey("empty")
	}
	if len(key) > maxLen {
		return badKey("%d bytes, more than %d", len(key), maxLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return badKey("byte %#02x at offset %d is not printable ASCII", c, i)
		}
	}
	return nil
}

// checkPrincipal validates a principal: at most MaxPrincipalLength bytes
// of valid UTF-8 without NUL; empty is allowed (one namespace for all).
func checkPrincipal(p string) error {
	switch {
	case len(p) > MaxPrincipalLength:
		return invalid("principal is %d bytes, more than %d", len(p), MaxPrincipalLength)
	case !utf8.ValidString(p):
		return invalid("principal is not valid UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return invalid("principal contains a NUL byte")
	}
	return nil
}

func badKey(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidKey, fmt.Sprintf(format, args...))
}

// Fingerprint returns the SHA-256 of parts, each prefixed with its length
// so that no two different lists of parts collide by concatenation. The
// middleware's default request fingerprint is Fingerprint(method, target,
// media type, body form, SHA-256(body)) (see Config.Fingerprint); Do
// callers may use it to fingerprint their arguments.
func Fingerprint(parts ...[]byte) []byte {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return h.Sum(nil)
}
