package idempotency

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRequestFingerprintCanonical: the default fingerprint treats a retry
// that re-serialises the same JSON (other key order, other whitespace) or
// reorders query parameters as the same request, and any change of a value,
// of the target or of a non-JSON body as another one.
func TestRequestFingerprintCanonical(t *testing.T) {
	fp := func(method, target, contentType, body string) string {
		return fpOf(t, method, target, contentType, body)
	}
	const js = "application/json"
	base := fp("POST", "/orders?a=1&b=2", js, `{"amount":100,"items":[{"sku":"x","n":2}],"note":null}`)
	same := []struct{ name, method, target, ct, body string }{
		{"keys reordered, whitespace", "POST", "/orders?a=1&b=2", js, "{ \"note\": null,\n \"items\": [ {\"n\":2, \"sku\":\"x\"} ], \"amount\": 100 }\n"},
		{"query reordered", "POST", "/orders?b=2&a=1", js, `{"amount":100,"items":[{"sku":"x","n":2}],"note":null}`},
		{"charset=utf-8 parameter", "POST", "/orders?a=1&b=2", "application/json; charset=utf-8", `{"note":null,"amount":100,"items":[{"n":2,"sku":"x"}]}`},
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

// fpOf is the default fingerprint of a request of method to target with
// contentType ("" sends none) and body.
func fpOf(t testing.TB, method, target, contentType, body string) string {
	t.Helper()
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

// TestRequestFingerprintCollisions: pairs of requests that a server can
// tell apart must not share a fingerprint (a retry of one would replay
// the other's response), and pairs that are provably the same request must
// still share one. Each "differ" pair collided before: the JSON decoder
// replaced invalid UTF-8 and unpaired surrogates by U+FFFD and kept the
// last of duplicate keys, url.Values dropped pairs with ';' or a bad
// %-escape, and the media type was ignored.
func TestRequestFingerprintCollisions(t *testing.T) {
	const js = "application/json"
	type req struct{ target, ct, body string }
	differ := []struct {
		name string
		a, b req
	}{
		{"invalid UTF-8 in a JSON string", req{"/", js, "{\"a\":\"\xff\"}"}, req{"/", js, "{\"a\":\"\xfe\"}"}},
		{"invalid UTF-8 vs U+FFFD", req{"/", js, "{\"a\":\"\xff\"}"}, req{"/", js, `{"a":"\ufffd"}`}},
		{"unpaired surrogates", req{"/", js, `{"a":"\ud800"}`}, req{"/", js, `{"a":"\udc00"}`}},
		{"unpaired surrogate vs U+FFFD", req{"/", js, `{"a":"\ud800"}`}, req{"/", js, "{\"a\":\"\uFFFD\"}"}},
		{"invalid UTF-8 in a key", req{"/", js, "{\"\xff\":1}"}, req{"/", js, "{\"\xfe\":1}"}},
		{"duplicate keys, last wins", req{"/", js, `{"a":1,"a":2}`}, req{"/", js, `{"a":2}`}},
		{"duplicate keys, first wins", req{"/", js, `{"a":2,"a":1}`}, req{"/", js, `{"a":1,"a":2}`}},
		{"nested duplicate keys", req{"/", js, `[{"a":1,"a":2}]`}, req{"/", js, `[{"a":2}]`}},
		{"query pair with ';' dropped", req{"/o?a=1;b=2&c=3", js, "{}"}, req{"/o?c=3", js, "{}"}},
		{"query pair with ';' vs '&'", req{"/o?a=1;b=2", js, "{}"}, req{"/o?a=1&b=2", js, "{}"}},
		{"query bad %-escape dropped", req{"/o?a=%zz&b=1", js, "{}"}, req{"/o?b=1", js, "{}"}},
		{"two bad %-escapes", req{"/o?a=%zz", js, "{}"}, req{"/o?a=%yy", js, "{}"}},
		{"text/plain vs JSON", req{"/", "text/plain", `{"a":1}`}, req{"/", js, `{ "a" : 1 }`}},
		{"text/plain vs JSON, same bytes", req{"/", "text/plain", `{"a":1}`}, req{"/", js, `{"a":1}`}},
		{"no Content-Type vs JSON", req{"/", "", `{"a":1}`}, req{"/", js, `{"a":1}`}},
		{"another +json type", req{"/", "application/merchant+json", `{"a":1}`}, req{"/", js, `{"a":1}`}},
		{"text charset", req{"/", "text/plain; charset=latin1", "caf\xe9"}, req{"/", "text/plain; charset=utf-8", "caf\xe9"}},
		{"form vs octets", req{"/", "application/x-www-form-urlencoded", "a=1"}, req{"/", "application/octet-stream", "a=1"}},
	}
	for _, c := range differ {
		if fpOf(t, "POST", c.a.target, c.a.ct, c.a.body) == fpOf(t, "POST", c.b.target, c.b.ct, c.b.body) {
			t.Errorf("%s: %q and %q share a fingerprint", c.name, c.a, c.b)
		}
	}
	same := []struct {
		name string
		a, b req
	}{
		{"whitespace and key order", req{"/", js, `{"b":[1, 2],"a":{"y":true,"x":null}}`}, req{"/", js, "{ \"a\" : {\"x\":null,\"y\":true},\n\"b\":[1,2] }"}},
		{"escapes of the same string", req{"/", js, `{"a":"\u00e9\/"}`}, req{"/", js, `{"a":"é/"}`}},
		{"surrogate pair escaped or not", req{"/", js, `{"a":"\ud83d\ude00"}`}, req{"/", js, `{"a":"😀"}`}},
		{"charset=utf-8 on JSON", req{"/", "application/json; charset=UTF-8", `{"a":1}`}, req{"/", js, `{"a":1}`}},
		{"media type case", req{"/", "Application/JSON", `{"a":1}`}, req{"/", js, `{"a":1}`}},
		{"query order", req{"/o?b=2&a=1", js, "{}"}, req{"/o?a=1&b=2", js, "{}"}},
		{"query escapes", req{"/o?a=%41+b", js, "{}"}, req{"/o?a=A%20b", js, "{}"}},
		{"same bytes, not JSON", req{"/", "text/plain", "caf\xe9"}, req{"/", "text/plain", "caf\xe9"}},
	}
	for _, c := range same {
		if fpOf(t, "POST", c.a.target, c.a.ct, c.a.body) != fpOf(t, "POST", c.b.target, c.b.ct, c.b.body) {
			t.Errorf("%s: %q and %q differ; want one request", c.name, c.a, c.b)
		}
	}
}

// FuzzRequestFingerprint: the canonical forms are only ever taken of
// input that has one, are fixed points, and mean the same: a canonical
// JSON body decodes to the value the body decodes to, and a canonical
// query parses to the same pairs.
func FuzzRequestFingerprint(f *testing.F) {
	f.Add("application/json", `{"b":[1,2.50,{"x":"\u00e9"}],"a":null}`, "b=2&a=1")
	f.Add("application/json", `{"a":1,"a":2}`, "a=1;b=2")
	f.Add("application/json", "{\"a\":\"\xff\"}", "a=%zz")
	f.Add("application/json", `{"a":"\ud800"}`, "a=%41+b")
	f.Add("application/problem+json; charset=UTF-8", ` [ true , false ] `, "")
	f.Add("text/plain", `{"a":1}`, "a&&b=")
	f.Fuzz(func(t *testing.T, contentType, body, query string) {
		if c, ok := canonicalJSON([]byte(body)); ok {
			if !json.Valid([]byte(body)) || !utf8.ValidString(body) {
				t.Fatalf("canonical form of a body that is not valid JSON in UTF-8: %q", body)
			}
			again, ok := canonicalJSON(c)
			if !ok || !bytes.Equal(again, c) {
				t.Fatalf("canonical form %q is not a fixed point: %q %v", c, again, ok)
			}
			if a, b := decodeAll(t, []byte(body)), decodeAll(t, c); !reflect.DeepEqual(a, b) {
				t.Fatalf("%q decodes to %#v, its canonical form %q to %#v", body, a, c, b)
			}
		}
		if v, err := url.ParseQuery(query); err == nil {
			c := canonicalQuery(query)
			if w, err := url.ParseQuery(c); err != nil || !reflect.DeepEqual(nonEmpty(v), nonEmpty(w)) || canonicalQuery(c) != c {
				t.Fatalf("query %q: canonical %q parses to %v (%v), want %v", query, c, w, err, v)
			}
		} else if canonicalQuery(query) != query {
			t.Fatalf("query %q does not parse but was rewritten", query)
		}
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.URL.RawQuery = query
		r.Header.Set("Content-Type", contentType)
		a, err := requestFingerprint(r, []byte(body))
		if err != nil || len(a) != 32 {
			t.Fatalf("fingerprint %x, %v", a, err)
		}
	})
}

func decodeAll(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return v
}

// nonEmpty drops the names without values (ParseQuery keeps "a" as
// a=[""], and Encode of that is "a=").
func nonEmpty(v url.Values) url.Values {
	if len(v) == 0 {
		return nil
	}
	return v
}
