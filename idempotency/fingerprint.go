package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// requestFingerprint is the default Config.Fingerprint:
//
//	Fingerprint(method, target, media type, body form, SHA-256(body))
//
// Only what is provably the same request is made equal; anything else is
// compared as sent:
//
//   - target: the escaped path, and the query in canonical form (pairs
//     sorted by name, each escaped alike: what url.Values, r.FormValue and
//     every form decoder see) when it parses in full; a query with a pair
//     that url.ParseQuery drops (a ';', a bad %-escape) is kept byte for
//     byte, so that the dropped pair still counts.
//   - media type: the Content-Type as mime.ParseMediaType reads it, type
//     and parameter names lower-cased, parameters sorted; JSON types
//     (application/json, any +json) drop a charset=utf-8 parameter, which
//     has no meaning for JSON (RFC 8259 §11). An unparsable value is kept
//     as sent. text/plain and application/json are two requests, whatever
//     the bytes.
//   - body: for a JSON type, canonical JSON (object members sorted by name,
//     insignificant whitespace dropped, strings re-escaped alike, numbers
//     as written) when the body is one JSON value in valid UTF-8 with no
//     duplicate member names and no U+FFFD, because a decoder replaces
//     invalid UTF-8 and unpaired surrogates by U+FFFD and keeps one of
//     duplicate members, so such bodies are not provably equal to any
//     canonical form; otherwise, and for every other type, the bytes as
//     sent. The body form ("json" or "bytes") is part of the fingerprint.
func requestFingerprint(r *http.Request, body []byte) ([]byte, error) {
	target := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		target += "?" + canonicalQuery(r.URL.RawQuery)
	}
	mt, isJSON := mediaType(r.Header.Values("Content-Type"))
	form, canon := "bytes", body
	if isJSON {
		if c, ok := canonicalJSON(body); ok {
			form, canon = "json", c
		}
	}
	sum := sha256.Sum256(canon)
	return Fingerprint([]byte(r.Method), []byte(target), []byte(mt), []byte(form), sum[:]), nil
}

// canonicalQuery returns raw in canonical form (url.Values.Encode: sorted
// by name, values in order) when url.ParseQuery reads all of it, else raw
// itself. The two cannot meet: Encode escapes ';' and never writes a bad
// %-escape, which a raw query that failed to parse has.
func canonicalQuery(raw string) string {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return raw
	}
	return v.Encode()
}

// mediaType returns the canonical media type of a request's Content-Type
// field values, and whether it is a JSON type.
func mediaType(values []string) (string, bool) {
	if len(values) != 1 {
		return strings.Join(values, "\n"), false // none, or several: as sent
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil {
		return values[0], false
	}
	isJSON := mt == "application/json" || strings.HasSuffix(mt, "+json")
	if cs, ok := params["charset"]; ok && isJSON && strings.EqualFold(cs, "utf-8") {
		delete(params, "charset")
	}
	if f := mime.FormatMediaType(mt, params); f != "" {
		return f, isJSON
	}
	return values[0], false
}

// maxJSONDepth bounds the nesting canonicalJSON follows; deeper bodies are
// compared byte for byte.
const maxJSONDepth = 1000

// canonicalJSON returns the canonical form of body and true when body is
// one JSON value in valid UTF-8 whose strings (member names included)
// contain no U+FFFD and whose objects have no duplicate member names (see
// requestFingerprint); otherwise false.
func canonicalJSON(body []byte) ([]byte, bool) {
	if !utf8.Valid(body) || !json.Valid(body) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var out bytes.Buffer
	if !canonicalValue(dec, &out, 0) {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data after the value
	}
	return out.Bytes(), true
}

// canonicalValue writes the next JSON value of dec to out in canonical
// form; false means the body has no canonical form.
func canonicalValue(dec *json.Decoder, out *bytes.Buffer, depth int) bool {
	tok, err := dec.Token()
	if err != nil || depth > maxJSONDepth {
		return false
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '[':
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if !canonicalValue(dec, out, depth+1) {
					return false
				}
			}
			out.WriteByte(']')
		case '{':
			type member struct {
				name  string
				value []byte
			}
			var members []member
			for dec.More() {
				tok, err := dec.Token()
				name, ok := tok.(string)
				if err != nil || !ok || strings.ContainsRune(name, utf8.RuneError) {
					return false
				}
				var value bytes.Buffer
				if !canonicalValue(dec, &value, depth+1) {
					return false
				}
				members = append(members, member{name, value.Bytes()})
			}
			slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
			out.WriteByte('{')
			for i, m := range members {
				if i > 0 {
					if m.name == members[i-1].name {
						return false // duplicate member names
					}
					out.WriteByte(',')
				}
				writeJSON(out, m.name)
				out.WriteByte(':')
				out.Write(m.value)
			}
			out.WriteByte('}')
		default:
			return false
		}
		// The closing delimiter.
		if _, err := dec.Token(); err != nil {
			return false
		}
	case string:
		if strings.ContainsRune(v, utf8.RuneError) {
			return false
		}
		writeJSON(out, v)
	case json.Number, bool, nil:
		writeJSON(out, v)
	default:
		return false
	}
	return true
}

// writeJSON writes v as encoding/json encodes it (strings escaped alike,
// numbers as written).
func writeJSON(out *bytes.Buffer, v any) {
	b, _ := json.Marshal(v) // strings, json.Number from the decoder, bools and nil always encode
	out.Write(b)
}
