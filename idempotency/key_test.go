package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/idempotency"
)

func TestParseKey(t *testing.T) {
	for _, c := range []struct {
		value, key string
		ok         bool
	}{
		{`8e03978e-40d5-43e8-bc93-6894a57f9324`, `8e03978e-40d5-43e8-bc93-6894a57f9324`, true},
		{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `8e03978e-40d5-43e8-bc93-6894a57f9324`, true},
		{`  "k 1"  `, `k 1`, true},
		{`"a\"b\\c"`, `a"b\c`, true},
		{`a,b;c=d`, `a,b;c=d`, true},
		{`~`, `~`, true},
		{``, ``, false},
		{`""`, ``, false},
		{`"`, ``, false},
		{`"abc`, ``, false},
		{`"a\b"`, ``, false},
		{`"ab"c`, ``, false},
		{`"ab";p=1`, ``, false},
		{`"ab" x`, ``, false},
		{`a b`, ``, false},
		{`a"b`, ``, false},
		{`a\b`, ``, false},
		{"a\tb", ``, false},
		{"\"a\tb\"", ``, false},
		{"a\x00", ``, false},
		{"\"\x7f\"", ``, false},
		{"é", ``, false},
		{strings.Repeat("k", 255), strings.Repeat("k", 255), true},
		{`"` + strings.Repeat("k", 255) + `"`, strings.Repeat("k", 255), true},
		{strings.Repeat("k", 256), ``, false},
		{`"` + strings.Repeat(`\"`, 255) + `"`, strings.Repeat(`"`, 255), true},
		{`"` + strings.Repeat(`\"`, 256) + `"`, ``, false},
		{strings.Repeat("k", 10<<10), ``, false},
	} {
		key, err := idempotency.ParseKey(c.value, 0)
		if c.ok != (err == nil) || key != c.key {
			t.Errorf("ParseKey(%.40q) = %.40q, %v; want %.40q, ok %v", c.value, key, err, c.key, c.ok)
		}
		if err != nil && (!errors.Is(err, idempotency.ErrInvalidKey) || !errors.Is(err, concurkit.ErrInvalidArgument)) {
			t.Errorf("ParseKey(%.40q): %v does not match ErrInvalidKey and ErrInvalidArgument", c.value, err)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("ParseKey(%.40q): error of %d bytes", c.value, len(err.Error()))
		}
	}
	if _, err := idempotency.ParseKey("abcdef", 5); err == nil {
		t.Error("maxLen 5 accepted 6 bytes")
	}
}

// FuzzParseKey: ParseKey never panics, accepts only keys within the
// bounds, and a key it accepts survives FormatKey (the quoted sf-string a
// client sends) unchanged.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"k1", `"k1"`, `"a\"b"`, `"`, `"\`, "", " \t", strings.Repeat("x", 300), "\x00", "é", `"a" `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		key, err := idempotency.ParseKey(value, 0)
		if err != nil {
			if !errors.Is(err, idempotency.ErrInvalidKey) {
				t.Fatalf("error %v does not match ErrInvalidKey", err)
			}
			return
		}
		if key == "" || len(key) > idempotency.DefaultMaxKeyLength {
			t.Fatalf("key of %d bytes accepted", len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("key %q has byte %#x", key, key[i])
			}
		}
		back, err := idempotency.ParseKey(idempotency.FormatKey(key), 0)
		if err != nil || back != key {
			t.Fatalf("FormatKey(%q) = %q parses to %q, %v", key, idempotency.FormatKey(key), back, err)
		}
	})
}

func TestFingerprint(t *testing.T) {
	a := idempotency.Fingerprint([]byte("ab"), []byte("c"))
	b := idempotency.Fingerprint([]byte("a"), []byte("bc"))
	if string(a) == string(b) || len(a) != 32 {
		t.Fatalf("parts collide by concatenation: %x %x", a, b)
	}
	if string(a) != string(idempotency.Fingerprint([]byte("ab"), []byte("c"))) {
		t.Fatal("not deterministic")
	}
}
