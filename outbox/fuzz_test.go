package outbox_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/concurkit/concurkit/outbox"
	"github.com/concurkit/concurkit/outbox/internal/spec"
)

// FuzzValidate: a message Validate accepts is stored unchanged by every
// adapter — text without NUL, valid UTF-8, headers that survive their JSON
// encoding byte for byte — and any stored headers column is either read or
// flagged (Message.Malformed), never a panic or a failed claim.
func FuzzValidate(f *testing.F) {
	f.Add("orders", "k", "traceparent", "00-abc", []byte(`{"a":"b"}`))
	f.Add("or\x00ders", "", "a", "\xff", []byte(`{"n":1}`))
	f.Add("t", "\xc3", "\x00", "v", []byte(`not json`))
	f.Fuzz(func(t *testing.T, topic, key, name, value string, stored []byte) {
		m := outbox.Message{Topic: topic, Key: key, Headers: map[string]string{name: value}}
		if m.Validate() == nil {
			for _, s := range []string{topic, key, name, value} {
				if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
					t.Fatalf("Validate accepted %q", s)
				}
			}
			b, err := json.Marshal(m.Headers)
			if err != nil {
				t.Fatal(err)
			}
			var back map[string]string
			if err := json.Unmarshal(b, &back); err != nil || !maps.Equal(back, m.Headers) {
				t.Fatalf("headers %q came back as %q (%v)", m.Headers, back, err)
			}
		}
		var got outbox.Message
		spec.Headers(&got, stored)
		if got.Malformed != nil && got.Headers != nil {
			t.Fatalf("flagged and decoded: %+v", got)
		}
	})
}
