package spec

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/concurkit/concurkit/ratelimit"
)

// TestStoreErrorRedacts: a store message that echoes the key (a server
// error quoting a value) is redacted; the error still unwraps to the
// store's, and a key too short to be a secret does not mangle the message.
func TestStoreErrorRedacts(t *testing.T) {
	const key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	cause := errors.New(`value "` + key + `" rejected: ` + io.ErrUnexpectedEOF.Error())
	wrapped := errors.Join(cause, io.ErrUnexpectedEOF)
	err := StoreError(context.Background(), "ratelimitx", key, wrapped)
	if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), ratelimit.KeyID(key)) {
		t.Errorf("message: %s", err)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, cause) {
		t.Errorf("%v does not unwrap to the store's error", err)
	}
	short := StoreError(context.Background(), "ratelimitx", "1", errors.New("dial tcp 127.0.0.1:1: refused"))
	if !strings.Contains(short.Error(), "dial tcp 127.0.0.1:1: refused") {
		t.Errorf("short key mangled the message: %s", short)
	}
	if got := ratelimit.KeyID(key); len(got) != len("key#")+12 || got == ratelimit.KeyID(key+"x") {
		t.Errorf("KeyID %q", got)
	}
}
