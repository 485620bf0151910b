package etcdlock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/etcdlock"
	"github.com/concurkit/concurkit/testkit"
)

// countingClient counts the requests that reach etcd (every acquisition
// starts with a Grant) and can make the server grant less than asked.
type countingClient struct {
	etcdlock.Client
	grants  atomic.Int32
	grantTo int64 // if > 0, the TTL actually requested from the server
}

func (c *countingClient) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	c.grants.Add(1)
	if c.grantTo > 0 {
		ttl = c.grantTo
	}
	return c.Client.Grant(ctx, ttl)
}

// TestBadInputBeforeIO: keys and options the backend cannot serve are
// rejected before any request, even against an unreachable server.
func TestBadInputBeforeIO(t *testing.T) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc := &countingClient{Client: c}
	l, err := etcdlock.New(cc, nil)
	t.Cleanup(func() { closeLocker(t, l) })
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		key  string
		opts *distlock.Options
		want error
	}{
		{"empty key", "", nil, distlock.ErrInvalidKey},
		{"invalid UTF-8", "order-\xff", nil, distlock.ErrInvalidKey},
		{"truncated rune", "caf\xc3", nil, distlock.ErrInvalidKey},
		{"too long", strings.Repeat("k", etcdlock.MaxKeyLen+1), nil, distlock.ErrInvalidKey},
		{"too long in runes", strings.Repeat("ü", etcdlock.MaxKeyLen/2+1), nil, distlock.ErrInvalidKey},
		{"negative ttl", "k", &distlock.Options{TTL: -time.Second}, concurkit.ErrInvalidArgument},
		{"ttl MaxInt64", "k", &distlock.Options{TTL: math.MaxInt64}, concurkit.ErrInvalidArgument},
		{"ttl above MaxTTL", "k", &distlock.Options{TTL: etcdlock.MaxTTL + time.Nanosecond}, concurkit.ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			if _, err := l.Acquire(ctx, tc.key, tc.opts); !errors.Is(err, tc.want) {
				t.Errorf("Acquire: %v, want %v", err, tc.want)
			}
			if _, err := l.TryAcquire(ctx, tc.key, tc.opts); !errors.Is(err, tc.want) {
				t.Errorf("TryAcquire: %v, want %v", err, tc.want)
			}
		})
	}
	if n := cc.grants.Load(); n != 0 {
		t.Errorf("%d requests reached etcd for invalid input", n)
	}

	var nilClient *clientv3.Client
	var nilCounting *countingClient
	for _, c := range []etcdlock.Client{nil, nilClient, nilCounting} {
		if _, err := etcdlock.New(c, nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("New(%T(nil)) = %v, want ErrInvalidArgument", c, err)
		}
	}
	if _, err := etcdlock.New(c, &etcdlock.Config{RequestTimeout: -time.Second}); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("New(RequestTimeout -1s) = %v, want ErrInvalidArgument", err)
	}
	if _, err := etcdlock.New(c, &etcdlock.Config{CleanupTimeout: -time.Second}); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Errorf("New(CleanupTimeout -1s) = %v, want ErrInvalidArgument", err)
	}
	// A nil or zero Locker is bad input too, not a panic.
	for name, l := range map[string]*etcdlock.Locker{"nil": nil, "zero": new(etcdlock.Locker)} {
		if _, err := l.Acquire(t.Context(), "k", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s Locker: Acquire = %v", name, err)
		}
		if _, err := l.TryAcquire(t.Context(), "k", nil); !errors.Is(err, concurkit.ErrInvalidArgument) {
			t.Errorf("%s Locker: TryAcquire = %v", name, err)
		}
	}
}

// TestKeysAreDistinct: keys that escape to similar paths, prefixes of each
// other and the longest valid key are distinct locks, held at once.
func TestKeysAreDistinct(t *testing.T) {
	c, prefix := testkit.Etcd(t)
	l := newLocker(t, c, prefix)
	keys := []string{"a", "a/b", "a%2Fb", "a/", "a%2F", "ü", "%C3%BC", "nul\x00byte", "nul%00byte",
		strings.Repeat("é", etcdlock.MaxKeyLen/2)}
	var leases []distlock.Lease
	for _, key := range keys {
		ls, err := l.TryAcquire(t.Context(), key, nil)
		if err != nil {
			t.Fatalf("TryAcquire(%.20q): %v", key, err)
		}
		if ls.Key() != key {
			t.Fatalf("Key() = %.20q, want %.20q", ls.Key(), key)
		}
		leases = append(leases, ls)
	}
	for _, ls := range leases {
		if err := ls.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTTLLimits: the largest TTL etcd grants works without overflow in
// the local validity; TTLs that do not fit are rejected (see
// TestBadInputBeforeIO) instead of wrapping around to a short lease.
func TestTTLLimits(t *testing.T) {
	c, prefix := testkit.Etcd(t)
	l := newLocker(t, c, prefix)
	before := time.Now()
	ls, err := l.TryAcquire(t.Context(), "k", &distlock.Options{TTL: etcdlock.MaxTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(context.Background())
	dl, _ := ls.Deadline()
	if d := dl.Sub(before); d < etcdlock.MaxTTL/100*98 || d > etcdlock.MaxTTL {
		t.Fatalf("validity %v for TTL %v", d, etcdlock.MaxTTL)
	}
	if err := ls.Extend(t.Context(), etcdlock.MaxTTL); err != nil {
		t.Fatal(err)
	}
}

// TestValidityCappedByGrantedTTL: the server grants less than asked (here
// forced by the client; a server with a lower limit would do the same):
// the lease's local validity follows the granted TTL, never the request.
func TestValidityCappedByGrantedTTL(t *testing.T) {
	c, prefix := testkit.Etcd(t)
	cc := &countingClient{Client: c, grantTo: 2}
	l, err := etcdlock.New(cc, &etcdlock.Config{Prefix: prefix})
	t.Cleanup(func() { closeLocker(t, l) })
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	ls, err := l.TryAcquire(t.Context(), "k", &distlock.Options{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(context.Background())
	if dl, _ := ls.Deadline(); dl.Sub(before) > 2*time.Second {
		d := dl.Sub(before)
		t.Fatalf("local validity %v exceeds the granted TTL 2s", d)
	}
	if err := ls.Extend(t.Context(), 30*time.Second); !errors.Is(err, concurkit.ErrInvalidArgument) {
		t.Fatalf("Extend(30s) of a 2s lease = %v, want ErrInvalidArgument", err)
	}
}
