package idempotency

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRequestFingerprintCanonical: the default fingerprint treats a retry
// that re-serialises the same JSON (other key order, other whitespace) or
// reorders query parameters as the same request, and any change of a value,
// of the target or of a non-JSON body as another one.
func TestRequestFingerprintCanonical(t *testing.T) {
	fp := func(method, target, contentType, body string) string {
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		f, err := requestFingerprint(r, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return string(f)
	}
	const js = "application/json"
	base := fp("POST", "/orders?a=1&b=2", js, `{"amount":100,"items":[{"sku":"x","n":2}],"note":null}`)
	same := []struct{ name, method, target, ct, body string }{
		{"keys reordered, whitespace", "POST", "/orders?a=1&b=2", js, "{ \"note\": null,\n \"items\": [ {\"n\":2, \"sku\":\"x\"} ], \"amount\": 100 }\n"},
		{"query reordered", "POST", "/orders?b=2&a=1", js, `{"amount":100,"items":[{"sku":"x","n":2}],"note":null}`},
		{"charset parameter, +json", "POST", "/orders?a=1&b=2", "application/merchant+json; charset=utf-8", `{"note":null,"amount":100,"items":[{"n":2,"sku":"x"}]}`},
	}
	for _, c := range same {
		if got := fp(c.method, c.target, c.ct, c.body); got != base {
			t.Errorf("%s: fingerprint differs; want the same request", c.name)
		}
	}
	other := []struct{ name, method, target, ct, body string }{
		{"value changed", "POST", "/orders?a=1&b=2", js, `{"amount":101,"items":[{"sku":"x","n":2}],"note":null}`},
		{"number spelled differently", "POST", "/orders?a=1&b=2", js, `{"amount":100.0,"items":[{"sku":"x","n":2}],"note":null}`},
		{"field added", "POST", "/orders?a=1&b=2", js, `{"amount":100,"items":[{"n":2,"sku":"x"}],"note":null,"x":[]}`},
		{"method", "PUT", "/orders?a=1&b=2", js, `{"amount":100,"items":[{"sku":"x","n":2}],"note":null}`},
		{"path", "POST", "/orders/2?a=1&b=2", js, `{"amount":100,"items":[{"sku":"x","n":2}],"note":null}`},
		{"query value", "POST", "/orders?a=1&b=3", js, `{"amount":100,"items":[{"sku":"x","n":2}],"note":null}`},
		{"not JSON: bytes", "POST", "/orders?a=1&b=2", "text/plain", `{"items":[{"sku":"x","n":2}],"amount":100,"note":null}`},
	}
	for _, c := range other {
		if got := fp(c.method, c.target, c.ct, c.body); got == base {
			t.Errorf("%s: same fingerprint; want another request", c.name)
		}
	}
	// Bodies that are not one JSON value are compared byte for byte.
	for _, b := range []string{`{"a":1} {"a":1}`, `{"a":`, `{"a":1}x`} {
		if fp("POST", "/", js, b) == fp("POST", "/", js, b+" ") {
			t.Errorf("%q: invalid JSON canonicalised", b)
		}
	}
}
