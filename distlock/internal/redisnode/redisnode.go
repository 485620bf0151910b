package redisnode

import (
	"context"
	"crypto/rand"
	_ "embed" // Lua scripts
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/retry"
)

var (
	//go:embed acquire.lua
	acquireLua string
	//go:embed extend.lua
	extendLua string
	//go:embed release.lua
	releaseLua string
	//go:embed retire.lua
	retireLua string
)

// Answers of the acquire script.
const (
	Acquired int64 = 1  // the lock was free and is now ours
	Busy     int64 = 0  // another holder has the lock
	Stale    int64 = -1 // a higher token already acquired the key: mint a new one
)

// Redis key layout. A user key k is stored as
//
//	ck:{E}:lock   the lock (value "<token>:<holder id>", PX TTL)
//	ck:{E}:fence  the highest token that ever acquired k
//
// where E is k with '%', '{' and '}' percent-encoded. E contains no '}',
// so the hash tag Redis Cluster hashes is exactly {E}: the two keys of one
// lock always share a slot (Lua scripts may only touch keys of one slot),
// and since the encoding is injective and ends at the first '}', two
// different user keys never share a Redis key (the old scheme k and
// k + ":fence" made the lock "x:fence" collide with the fence key of "x").
const (
	keyPrefix   = "ck:{"
	lockSuffix  = "}:lock"
	fenceSuffix = "}:fence"
)

var keyEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

func escape(key string) string {
	if !strings.ContainsAny(key, "%{}") {
		return key
	}
	return keyEscaper.Replace(key)
}

// LockKey returns the Redis key that holds the lock on key.
func LockKey(key string) string { return keyPrefix + escape(key) + lockSuffix }

// FenceKey returns the Redis key that records the highest fencing token
// that acquired key. It shares LockKey(key)'s Redis Cluster hash slot.
func FenceKey(key string) string { return keyPrefix + escape(key) + fenceSuffix }

// Keys are the Redis keys of one user key, computed once per acquisition.
type Keys struct {
	both []string // lock, fence: the acquire script's KEYS
}

// NewKeys returns the Redis keys of key.
func NewKeys(key string) Keys {
	e := escape(key)
	return Keys{both: []string{keyPrefix + e + lockSuffix, keyPrefix + e + fenceSuffix}}
}

// Lock returns the lock key.
func (k Keys) Lock() string { return k.both[0] }

// Fence returns the key of the fence record.
func (k Keys) Fence() string { return k.both[1] }

// Millis returns d in whole milliseconds rounded UP, for PX: the server
// then holds a key at least as long as the client counts on. It does not
// overflow for any Duration (math.MaxInt64 ns is 9223372036855 ms, which
// Redis accepts); d ≤ 0 gives a value ≤ 0, which callers reject first.
func Millis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// Scripts runs the lock scripts on a node. Create it once with NewScripts
// (each script's SHA1 is computed there); it is safe for concurrent use.
//
// Every script keeps the fence record of a held lock alive for the lock's
// TTL plus fenceTTL (the backends' Config.FenceTTL), so the record always
// outlives the lock, and the acquire and release scripts are idempotent,
// so that a request the client retries after the server applied it
// (go-redis does after a read timeout) is answered as the first one was.
type Scripts struct {
	acquire, extend, release, retire *goredis.Script
}

// NewScripts returns the acquire, extend, release and retire scripts.
func NewScripts() *Scripts {
	return &Scripts{
		acquire: goredis.NewScript(acquireLua),
		extend:  goredis.NewScript(extendLua),
		release: goredis.NewScript(releaseLua),
		retire:  goredis.NewScript(retireLua),
	}
}

// fenceMillis is the expiry of the fence record of a lock held for ttl:
// ttl plus fenceTTL, in milliseconds rounded up, saturated at
// Millis(math.MaxInt64) (which Redis accepts).
func fenceMillis(ttl, fenceTTL time.Duration) int64 {
	a, b := Millis(ttl), Millis(fenceTTL)
	if limit := Millis(math.MaxInt64); a > limit-b {
		return limit
	}
	return a + b
}

// Acquire runs the acquire script on c: it sets the lock key to value for
// ttl if it is free and tok is not lower than the highest token recorded
// in the fence key, which then records tok for ttl + fenceTTL (rounded up
// to whole milliseconds). A lock that already holds value (a retry of
// this very request) counts as acquired, its expiry reset. It returns
// Acquired, Busy or Stale, or the error of the request (outcome unknown:
// the lock may have been taken; see Retire).
func (s *Scripts) Acquire(ctx context.Context, c goredis.Scripter, k Keys, value string, ttl time.Duration, tok fenced.Token, fenceTTL time.Duration) (int64, error) {
	return s.acquire.Run(ctx, c, k.both, value, Millis(ttl), tok.String(), fenceMillis(ttl, fenceTTL)).Int64()
}

// Extend renews the lock for ttl (rounded up to whole milliseconds) if it
// still holds value, and the fence record for at least ttl + fenceTTL. It
// returns 1 (renewed) or 0 (not ours any more).
func (s *Scripts) Extend(ctx context.Context, c goredis.Scripter, k Keys, value string, ttl, fenceTTL time.Duration) (int64, error) {
	return s.extend.Run(ctx, c, k.both, value, Millis(ttl), fenceMillis(ttl, fenceTTL)).Int64()
}

// Answers of Release.
const (
	Released int64 = 1 // the lock is gone and nobody held it after us
	Taken    int64 = 0 // another holder acquired the key since
	Emptied  int64 = 2 // the server has no record of the key at all (lost its data)
)

// Release deletes the lock if it still holds value. It returns Released
// when the lock is gone and nobody held it after value's acquisition:
// deleted now, or already gone while the fence record still holds value's
// token (the first try of a request the client retried, an expiry nobody
// used, an operator's DEL); Taken when it is not ours any more (another
// value holds it, or the fence record moved on: another holder acquired
// since); Emptied when the server holds neither the lock nor a fence
// record (restarted without persistence, flushed): nobody acquired it
// there, and nothing of ours is left.
func (s *Scripts) Release(ctx context.Context, c goredis.Scripter, k Keys, value string) (int64, error) {
	n, err := s.release.Run(ctx, c, k.both, value).Int64()
	switch n {
	case 1, 2:
		return Released, err
	case 3:
		return Emptied, err
	}
	return Taken, err
}

// Retire undoes an acquisition with value and tok whose outcome is unknown
// (its request failed or was given up on, and may still be queued in the
// server): it deletes the lock if it holds value and raises the fence
// record above tok (for at least ttl + fenceTTL), so that the SET, should
// it run later, is refused as stale. One answer is a confirmed cleanup,
// whatever the order in which the two requests run. It returns 1 if it
// deleted the lock, else 0.
func (s *Scripts) Retire(ctx context.Context, c goredis.Scripter, k Keys, value string, tok fenced.Token, ttl, fenceTTL time.Duration) (int64, error) {
	// tok+1 as a decimal string; uint64 holds math.MaxInt64+1.
	next := strconv.FormatUint(uint64(tok)+1, 10)
	return s.retire.Run(ctx, c, k.both, value, next, fenceMillis(ttl, fenceTTL)).Int64()
}

// Persist calls call until the server answers it, a retry cannot help
// (Definitive), ctx ends or until passes, backing off between tries (full
// jitter, from 10 ms up to a second). Each try runs on ctx bounded by
// until: a client with ContextTimeoutEnabled ends it there, others at
// their own ReadTimeout. It returns the answer, or the last error.
//
// Cleanups that must not give up at the first timeout use it: a lock that
// a frozen server applies when it thaws is deleted then, as long as the
// server thaws before until.
func Persist(ctx context.Context, until time.Time, call func(ctx context.Context) (int64, error)) (int64, error) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for n := 1; ; n++ {
		cctx, cancel := context.WithDeadline(ctx, until)
		res, err := call(cctx)
		cancel()
		if err == nil || Definitive(err) || ctx.Err() != nil {
			return res, err
		}
		d := retry.Policy{BaseDelay: 10 * time.Millisecond, MaxDelay: time.Second}.Backoff(n)
		if !time.Now().Add(d).Before(until) {
			return res, err
		}
		if t == nil {
			t = time.NewTimer(d)
		} else {
			t.Reset(d)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return res, err
		}
	}
}

// Definitive reports whether a request that failed with err needs no
// retry to know that nothing of it can still reach the server: the server
// answered with an error (a script error), the client was closed, or the
// connection was refused (no server process listens; one that died
// dropped the requests it had queued).
func Definitive(err error) bool {
	var rerr goredis.Error
	return errors.As(err, &rerr) || errors.Is(err, goredis.ErrClosed) || errors.Is(err, syscall.ECONNREFUSED)
}

// Ended returns ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed even if its timer has not fired yet: a client that puts the
// deadline on its socket (ContextTimeoutEnabled) can report an i/o
// timeout a moment before ctx reports its end, and that failure is the
// caller's deadline, not the server's.
func Ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value returns a lock value for one acquisition with tok: the token (so
// it stays readable on the server) and a random holder id (so
// compare-and-delete matches exactly this acquisition).
func Value(tok fenced.Token) string {
	return tok.String() + ":" + rand.Text()
}

// HonoursDeadline reports whether c applies a context's deadline to its
// socket reads and writes. go-redis does so only with
// Options.ContextTimeoutEnabled; otherwise a request to a hung (frozen,
// not dead) server blocks for the client's ReadTimeout and retries,
// whatever the context says. Even then it never watches a context's
// cancellation. Only a *redis.Client is trusted: a cluster client or ring
// may block elsewhere (slot map reloads).
func HonoursDeadline(c goredis.Scripter) bool {
	cl, ok := c.(*goredis.Client)
	return ok && cl.Options().ContextTimeoutEnabled
}

// Background runs and tracks the goroutines a Locker leaves behind:
// requests it stopped waiting for and the cleanups that follow them. Each
// is bounded by the client's own timeouts or a cleanup's deadline. The
// zero value is ready to use.
//
// It is the Locker's lease.Group: the Locker's Close releases its leases
// and waits for these goroutines.
type Background = lease.Group

// Request runs call(reqCtx) and returns its answer, or the context error
// as soon as ctx or reqCtx ends, whichever comes first, whatever the
// client's options. ctx is what the caller waits on: it may be cancelled
// at any moment. reqCtx is what the request itself runs under: ctx, or a
// detached context that ends only at its deadline (a delete that should
// outlive the caller's wait, bounded by a cleanup timeout).
//
// call runs on the caller's goroutine only when nobody can stop waiting
// before the client returns by itself: ctx can never end, and reqCtx can
// never end either or ends at a deadline that honours says the client
// puts on its socket. No client stops a request on a context's
// cancellation (go-redis with ContextTimeoutEnabled applies only the
// deadline), so otherwise call runs in a goroutine of bg. If Request
// stops waiting (abandoned is true) that goroutine runs orphan, if not
// nil, with the late answer once call returns, so what a request did
// after its caller gave up can be undone in order, after it.
func Request(ctx, reqCtx context.Context, honours bool, bg *Background, call func(ctx context.Context) (int64, error), orphan func(n int64, err error)) (n int64, err error, abandoned bool) {
	if ctx.Done() == nil && (reqCtx.Done() == nil || honours && hasDeadline(reqCtx)) {
		n, err = call(reqCtx)
		return n, err, false
	}
	type answer struct {
		n   int64
		err error
	}
	const (
		waiting = iota
		delivered
		given
	)
	var state atomic.Int32
	ch := make(chan answer, 1)
	bg.Go(func() {
		n, err := call(reqCtx)
		if state.CompareAndSwap(waiting, delivered) {
			ch <- answer{n, err}
			return
		}
		if orphan != nil {
			orphan(n, err)
		}
	})
	var done <-chan struct{}
	select {
	case a := <-ch:
		return a.n, a.err, false
	case <-ctx.Done():
		done = ctx.Done()
	case <-reqCtx.Done():
		done = reqCtx.Done()
	}
	if !state.CompareAndSwap(waiting, given) {
		a := <-ch // delivered just now
		return a.n, a.err, false
	}
	if done == ctx.Done() {
		return 0, ctx.Err(), true
	}
	return 0, reqCtx.Err(), true
}

func hasDeadline(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok
}

// Attempt makes one acquisition attempt with the token in *tok, minting
// one from source first when *tok is zero. try takes the lock with that
// token and a fresh Value; it reports stale when a node answered that a
// higher token already acquired the key. Then *tok is reset and try runs
// once more with a freshly minted token; if that one is stale too, the
// second try's error is returned. Otherwise Attempt returns what try
// returned, and *tok keeps the token for the next attempt (reused while
// the lock is merely busy: no round trip to the source per poll).
//
// pkg prefixes the errors of minting ("redislock", "redlock"). When
// minting fails Attempt returns errors.Join(distlock.ErrNotAcquired,
// ctx.Err()) if ctx has ended, an error matching distlock.ErrTokenExhausted
// (and the source's fenced.ErrTokenOverflow) when the source is used up,
// and the wrapped error of source otherwise; an invalid token from source
// (≤ 0, e.g. a counter that wrapped around) is fenced.ErrInvalidToken.
func Attempt[L any](ctx context.Context, source fenced.Source, pkg, key string, tok *fenced.Token,
	try func(tok fenced.Token, value string) (l L, stale bool, err error)) (L, error) {
	var zero L
	var err error
	for range 2 {
		if !tok.Valid() {
			t, merr := source.Next(ctx)
			if merr != nil {
				if cerr := ctx.Err(); cerr != nil {
					return zero, errors.Join(distlock.ErrNotAcquired, cerr)
				}
				if errors.Is(merr, fenced.ErrTokenOverflow) {
					return zero, fmt.Errorf("%w: %s: mint token for %q: %w", distlock.ErrTokenExhausted, pkg, key, merr)
				}
				return zero, fmt.Errorf("%s: mint token for %q: %w", pkg, key, merr)
			}
			if !t.Valid() {
				return zero, fmt.Errorf("%s: token source returned %w: %d", pkg, fenced.ErrInvalidToken, int64(t))
			}
			*tok = t
		}
		var l L
		var stale bool
		l, stale, err = try(*tok, Value(*tok))
		if !stale {
			return l, err
		}
		*tok = 0
	}
	return zero, err
}

// NoValidity reports whether ttl leaves no validity after drift and
// margin (ttl − drift − margin ≤ 0; negative drift or margin count as
// zero), without the overflow the plain subtraction has when drift or
// margin is near math.MaxInt64.
func NoValidity(ttl, drift, margin time.Duration) bool {
	drift, margin = max(drift, 0), max(margin, 0)
	return ttl <= 0 || ttl <= drift || ttl-drift <= margin
}

// Duration is one duration field of a backend's Config: its name (for the
// error message), the field, and the default that replaces zero.
type Duration struct {
	Name    string
	Field   *time.Duration
	Default time.Duration
}

// ResolveDurations returns an error matching concurkit.ErrInvalidArgument
// ("pkg: Config.Name v < 0") for the first negative field and otherwise
// sets each zero field to its Default (a zero Default leaves it zero).
func ResolveDurations(pkg string, ds ...Duration) error {
	for _, d := range ds {
		if *d.Field < 0 {
			return fmt.Errorf("%w: %s: Config.%s %v < 0", concurkit.ErrInvalidArgument, pkg, d.Name, *d.Field)
		}
	}
	for _, d := range ds {
		if *d.Field == 0 {
			*d.Field = d.Default
		}
	}
	return nil
}
