package wire

import (
	"net/http"
	"reflect"
	"testing"
)

// TestHeaderRoundTrip: every field value comes back byte for byte, and
// the first version's format (arrays of strings) still reads.
func TestHeaderRoundTrip(t *testing.T) {
	h := http.Header{
		"Content-Disposition": {"attachment; filename=\"r\xe9sum\xe9.txt\""},
		"Location":            {"/files/\xff\xfe", "/plain"},
		"X-Nul":               {"a\x00b"},
		"Content-Type":        {"application/json"},
		"X-Empty":             {""},
	}
	b, err := Header(h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseHeader(b)
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("%s read back as %q (%v), want %q", b, got, err, h)
	}
	old, err := ParseHeader([]byte(`{"Location":["/a","/b"],"Content-Type":["text/plain"]}`))
	if err != nil || !reflect.DeepEqual(old, http.Header{"Location": {"/a", "/b"}, "Content-Type": {"text/plain"}}) {
		t.Fatalf("first version: %q, %v", old, err)
	}
	for _, bad := range []string{`{"A":[1]}`, `{"A":[{"b64":"!"}]}`, `[]`} {
		if _, err := ParseHeader([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// FuzzHeader: any field values round-trip, byte for byte. (Names are
// tokens, checked by the middleware: a name outside ASCII is replaced.)
func FuzzHeader(f *testing.F) {
	f.Add("Location", "/a\xff", "b")
	f.Add("X", "\x00", "")
	f.Fuzz(func(t *testing.T, name, v1, v2 string) {
		for _, c := range []byte(name) {
			if c <= ' ' || c >= 0x7f {
				name = "X"
				break
			}
		}
		h := http.Header{name: {v1, v2}}
		b, err := Header(h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseHeader(b)
		if err != nil || !reflect.DeepEqual(got, h) {
			t.Fatalf("%q: %s read back as %q, %v", h, b, got, err)
		}
	})
}
