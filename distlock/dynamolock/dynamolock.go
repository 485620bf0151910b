package dynamolock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/dynamoapi"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/observe"
)

// pkg names the package in errors and observe events.
const pkg = "dynamolock"

// Client is the part of *dynamodb.Client (aws-sdk-go-v2) the Locker uses:
// UpdateItem, for every acquisition, heartbeat and release.
type Client = dynamoapi.Updater

var _ Client = (*dynamodb.Client)(nil)

// Attribute names of a lock item (besides the partition key).
const (
	AttrOwner   = "owner"    // S: the holder's per-lease secret; absent when free
	AttrRVN     = "rvn"      // S: record version number, new on every write
	AttrLeaseMS = "lease_ms" // N: lease duration in milliseconds
	AttrToken   = "token"    // N: fencing-token counter, never reset
)

// DefaultKeyColumn is the partition-key attribute name used when
// Config.KeyColumn is empty.
const DefaultKeyColumn = "lock_key"

// MaxKeyBytes is the length limit of a lock key in bytes (of UTF-8):
// DynamoDB's limit for a partition-key value. The key is stored as given,
// with no prefix.
const MaxKeyBytes = 2048

// Default polling delays while waiting for a held lock.
const (
	DefaultPollMin = 2 * time.Millisecond
	DefaultPollMax = 50 * time.Millisecond
)

// DefaultRequestTimeout bounds each DynamoDB request when
// Config.RequestTimeout is zero.
const DefaultRequestTimeout = 5 * time.Second

// Config configures a Locker. A zero field means the documented default; a
// negative duration is bad input (an error matching
// concurkit.ErrInvalidArgument). Table has no default: it is required, so
// a nil *Config is an error too. New copies the Config.
type Config struct {
	// Table is the lock table (required). Its partition key must be a
	// string attribute named KeyColumn; see CreateTable.
	Table string
	// KeyColumn is the partition-key attribute; empty means
	// DefaultKeyColumn ("lock_key").
	KeyColumn string
	// PollMin and PollMax bound the jittered backoff between attempts of a
	// waiting Acquire. Zero means DefaultPollMin (2 ms) and DefaultPollMax
	// (50 ms).
	PollMin, PollMax time.Duration
	// RequestTimeout bounds each DynamoDB request (acquisition, heartbeat,
	// release), whatever the caller's context: the SDK's default HTTP
	// client has no overall timeout, so a request to a frozen server would
	// otherwise wait forever. A caller's earlier deadline still applies.
	// Zero means DefaultRequestTimeout (5 s).
	RequestTimeout time.Duration
	// CleanupTimeout bounds Release's cleanup (the conditional update that
	// removes the owner), which ignores the cancellation of the caller's
	// context; the request is bounded by RequestTimeout as well. Zero
	// means distlock.DefaultCleanupTimeout (5 s).
	CleanupTimeout time.Duration
}

// Locker hands out leases on items of one table. It is safe for
// concurrent use. It remembers, per key, the RVN it last saw and since
// when (on its own clock), so that TryAcquire can also take over a lock
// whose holder stopped heartbeating.
type Locker struct {
	db   Client
	opts Config
	bg   lease.Group // leases handed out, background cleanups (Close)

	mu         sync.Mutex
	seen       map[string]observation
	sweep      int           // prune seen when it grows past this size
	minSweep   int           // ... and past this one (minSweep; tests lower it)
	pruneAfter time.Duration // least idle time of a pruned observation (tests shorten it)
}

type observation struct {
	rvn   string
	lease time.Duration
	since time.Time // local, monotonic: when rvn was first seen
	last  time.Time // when it was last seen
}

// minSweep is the size of the seen map below which it is never pruned.
const minSweep = 1024

var (
	_ distlock.Locker = (*Locker)(nil)
	_ distlock.Closer = (*Locker)(nil)
)

// New returns a Locker on the table cfg.Table, through client (a
// *dynamodb.Client). It does no I/O. It returns an error matching
// concurkit.ErrInvalidArgument for a nil client (also a typed nil such as
// a nil *dynamodb.Client), a nil cfg, an empty cfg.Table or a negative
// duration.
func New(client Client, cfg *Config) (*Locker, error) {
	if handle.IsNil(client) {
		return nil, fmt.Errorf("%w: dynamolock: nil client", concurkit.ErrInvalidArgument)
	}
	var opts Config
	if cfg != nil {
		opts = *cfg
	}
	switch {
	case opts.Table == "":
		return nil, fmt.Errorf("%w: dynamolock: empty Config.Table (required)", concurkit.ErrInvalidArgument)
	case opts.PollMin < 0 || opts.PollMax < 0 || opts.RequestTimeout < 0 || opts.CleanupTimeout < 0:
		return nil, fmt.Errorf("%w: dynamolock: negative Config duration (PollMin %v, PollMax %v, RequestTimeout %v, CleanupTimeout %v)",
			concurkit.ErrInvalidArgument, opts.PollMin, opts.PollMax, opts.RequestTimeout, opts.CleanupTimeout)
	}
	if opts.KeyColumn == "" {
		opts.KeyColumn = DefaultKeyColumn
	}
	if opts.PollMin == 0 {
		opts.PollMin = DefaultPollMin
	}
	if opts.PollMax == 0 {
		opts.PollMax = DefaultPollMax
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	return &Locker{db: client, opts: opts, seen: map[string]observation{}, minSweep: minSweep, pruneAfter: time.Minute}, nil
}

// check rejects a nil Locker or one not made by New, before any I/O.
func (l *Locker) check() error {
	if l == nil || l.db == nil {
		return fmt.Errorf("%w: dynamolock: nil or zero Locker (use New)", concurkit.ErrInvalidArgument)
	}
	return nil
}

// Update expressions.
const (
	exprTake = "SET #owner = :owner, #rvn = :rvn, #lease = :lease ADD #token :one"
	// condFree: nobody holds the lock, and the counter is below :maxtok
	// (math.MaxInt64), so that the ADD cannot take it past int64.
	condFree = "attribute_not_exists(#owner) AND " + condCounter
	// condTakeover: nothing was written since the waiter saw :seen.
	condTakeover = "#rvn = :seen AND " + condCounter
	condCounter  = "(attribute_not_exists(#token) OR #token < :maxtok)"
	exprBeat     = "SET #rvn = :rvn, #lease = :lease"
	exprRelease  = "REMOVE #owner, #rvn, #lease"
	condMine     = "#owner = :owner"
)

func (l *Locker) names() map[string]string {
	return map[string]string{"#owner": AttrOwner, "#rvn": AttrRVN, "#lease": AttrLeaseMS, "#token": AttrToken}
}

func (l *Locker) itemKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{l.opts.KeyColumn: &types.AttributeValueMemberS{Value: key}}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func secret() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// checkKey refuses keys DynamoDB cannot store as given: longer than
// MaxKeyBytes, or not valid UTF-8 (DynamoDB would store U+FFFD for the
// invalid bytes, so that two different keys would share one lock).
func checkKey(key string) error {
	switch {
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: dynamolock: %d bytes, more than DynamoDB's %d", distlock.ErrInvalidKey, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: dynamolock: %q is not valid UTF-8", distlock.ErrInvalidKey, key)
	}
	return nil
}

func (l *Locker) resolve(key string, opts *distlock.Options) (distlock.Options, error) {
	if err := l.check(); err != nil {
		return distlock.Options{}, err
	}
	o, err := lease.Resolve(pkg, key, opts)
	if err != nil {
		return o, err
	}
	return o, checkKey(key)
}

// Acquire blocks until the lock is held or ctx ends (then it returns
// errors.Join(distlock.ErrNotAcquired, ctx.Err())). A held lock is taken
// over only after this Locker has watched its RVN stay unchanged for the
// holder's full lease duration. Throttling, server errors (5xx), timeouts
// and connection errors are retried; a request DynamoDB refuses (missing
// table, validation, access denied) ends Acquire at once with the SDK's
// error wrapped (errors.As finds e.g. *types.ResourceNotFoundException).
// It returns distlock.ErrInvalidKey for an empty key, one longer than
// MaxKeyBytes or not valid UTF-8, an error matching
// concurkit.ErrInvalidArgument for a negative TTL (and for a nil Locker),
// and distlock.ErrTokenExhausted when the key's token counter is used up.
// It returns by ctx's deadline even if the server does not answer: an
// acquisition request still in flight then finishes in the background (at
// most RequestTimeout), and a lock it took is given back.
//
// An Acquire that found the lock held reports its wait to the hooks of
// ctx (observe.Hooks.LockWait), and the lease reports its extensions and
// its loss to them (see distlock.Locker).
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := l.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	if l.bg.Closed() {
		return nil, lease.ErrClosed(pkg)
	}
	owner := secret()    // one secret per call: a retry recognises its own earlier write
	var unsure time.Time // when the latest attempt of unknown outcome was sent
	lz, err := lease.Poll(ctx, lease.PollPolicy{Min: l.opts.PollMin, Max: l.opts.PollMax, Package: pkg, Key: key, Stop: l.bg.Done()}, func(ctx context.Context) (distlock.Lease, error) {
		lz, err := l.try(ctx, key, o, owner)
		var ae *ambiguousError
		if errors.As(err, &ae) {
			// The write may have been applied: keep trying with the same
			// secret; the next attempt finds out.
			unsure = ae.sent
			return nil, fmt.Errorf("%w: %w", distlock.ErrNotAcquired, err)
		}
		return lz, err
	})
	if err != nil && !unsure.IsZero() {
		// Giving up after an attempt of unknown outcome: remove our owner
		// secret if it is there (compare-and-delete, never another's),
		// for as long as that attempt could still be applied.
		l.undo(key, owner, false, unsure.Add(o.TTL))
	}
	return lz, err
}

// ambiguousError is a failed request whose write may have been applied;
// sent is when it was sent.
type ambiguousError struct {
	err  error
	sent time.Time
}

func (e *ambiguousError) Error() string { return e.err.Error() }
func (e *ambiguousError) Unwrap() error { return e.err }

// TryAcquire makes one attempt and returns distlock.ErrNotAcquired if the
// lock is held — unless this Locker saw the same RVN at least the
// holder's lease duration ago, in which case it takes the lock over. Its
// other errors are those of Acquire; a retryable failure (throttling,
// timeout) is returned wrapped, and a lock the failed attempt may have
// taken is given back in the background.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := l.resolve(key, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(distlock.ErrNotAcquired, err)
	}
	if l.bg.Closed() {
		return nil, lease.ErrClosed(pkg)
	}
	owner := secret()
	lz, err := l.try(ctx, key, o, owner)
	var ae *ambiguousError
	if errors.As(err, &ae) {
		l.undo(key, owner, false, ae.sent.Add(o.TTL)) // see Acquire
	}
	return lz, err
}

// try makes one acquisition attempt (and a takeover attempt when the
// observed lease has run out).
func (l *Locker) try(ctx context.Context, key string, o distlock.Options, owner string) (distlock.Lease, error) {
	start := time.Now()
	tok, cur, err := l.take(ctx, key, o.TTL, owner, "")
	if err == nil {
		return l.newLease(ctx, key, owner, tok, o, start)
	}
	if cur == nil {
		return nil, err
	}
	curOwner, rvn, leaseDur := itemString(cur, AttrOwner), itemString(cur, AttrRVN), itemDuration(cur, AttrLeaseMS)
	if curOwner == owner {
		// An earlier attempt of this call was applied but its answer was
		// lost: we hold the lock. Renew it so its validity starts now.
		v, err := counter(cur)
		if err != nil {
			return nil, fmt.Errorf("dynamolock: token of %q: %w", key, err)
		}
		start = time.Now()
		if err := l.beat(ctx, key, owner, o.TTL); err != nil {
			switch {
			case errors.Is(err, distlock.ErrLeaseLost): // taken over since: wait again
				return nil, distlock.ErrNotAcquired
			case retryable(err):
				return nil, &ambiguousError{err: err, sent: start}
			}
			return nil, err
		}
		return l.newLease(ctx, key, owner, fenced.Token(v), o, start)
	}
	if err := refused(key, cur); !errors.Is(err, distlock.ErrNotAcquired) || curOwner == "" {
		// A used-up counter, or free yet refused: released meanwhile;
		// the next attempt sees the item as it is now.
		return nil, err
	}
	if !l.expired(key, rvn, leaseDur) {
		return nil, distlock.ErrNotAcquired
	}
	start = time.Now()
	tok, cur, err = l.take(ctx, key, o.TTL, owner, rvn)
	if err != nil {
		if cur != nil {
			return nil, refused(key, cur)
		}
		return nil, err
	}
	return l.newLease(ctx, key, owner, tok, o, start)
}

// refused explains a failed condition from the item as it was: a used-up
// or unreadable token counter, or else the lock is held
// (distlock.ErrNotAcquired).
func refused(key string, item map[string]types.AttributeValue) error {
	v, err := counter(item)
	switch {
	case v == math.MaxInt64: // also when past it (strconv.ErrRange)
		return fmt.Errorf("%w: dynamolock: the token counter of %q reached %s", distlock.ErrTokenExhausted, key, itemNumber(item, AttrToken))
	case err != nil:
		return fmt.Errorf("dynamolock: token of %q: %w", key, err)
	}
	return distlock.ErrNotAcquired
}

// expired records the observation of rvn and reports whether this Locker
// has seen that same rvn for at least its lease duration.
func (l *Locker) expired(key, rvn string, dur time.Duration) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	ob, ok := l.seen[key]
	if !ok || ob.rvn != rvn {
		l.seen[key] = observation{rvn: rvn, lease: dur, since: now, last: now}
		l.pruneLocked(now)
		return false
	}
	ob.last = now
	l.seen[key] = ob
	return now.Sub(ob.since) >= ob.lease
}

// pruneLocked forgets, once the map has doubled since the last pruning,
// the observations nobody looked at for twice their lease duration (at
// least a minute): a waiter that comes back to such a key starts watching
// it again, which delays a takeover but never allows an early one. It
// keeps the map's size proportional to the keys in use rather than to
// every key ever observed. l.mu is held.
func (l *Locker) pruneLocked(now time.Time) {
	if len(l.seen) <= max(l.sweep, l.minSweep) {
		return
	}
	for k, ob := range l.seen {
		if idle := now.Sub(ob.last); idle > l.pruneAfter && idle/2 > ob.lease {
			delete(l.seen, k)
		}
	}
	l.sweep = 2 * len(l.seen)
}

// observed returns how many keys the Locker keeps an observation of (to
// tell when a holder stopped heartbeating).
func (l *Locker) observed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

func (l *Locker) forget(key string) {
	l.mu.Lock()
	delete(l.seen, key)
	l.mu.Unlock()
}

// take writes the lock item: free → condition attribute_not_exists(owner);
// takeover (seen != "") → condition rvn = seen; both also need the token
// counter below math.MaxInt64. It returns the new token; or
// distlock.ErrNotAcquired with the item as it was when the condition
// failed; or an *ambiguousError when the request may have been applied
// and is worth retrying; or any other failure, wrapped, which retrying
// cannot fix.
func (l *Locker) take(ctx context.Context, key string, ttl time.Duration, owner, seen string) (fenced.Token, map[string]types.AttributeValue, error) {
	values := map[string]types.AttributeValue{
		":owner": str(owner), ":rvn": str(secret()), ":lease": num(leaseMillis(ttl)), ":one": num(1),
		":maxtok": num(math.MaxInt64),
	}
	cond := condFree
	if seen != "" {
		cond = condTakeover
		values[":seen"] = str(seen)
	}
	sent := time.Now()
	out, err := l.send(ctx, key, owner, ttl, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(l.opts.Table),
		Key:                                 l.itemKey(key),
		UpdateExpression:                    aws.String(exprTake),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            l.names(),
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
	case errors.As(err, &ccf):
		return 0, ccf.Item, distlock.ErrNotAcquired
	case errors.Is(err, distlock.ErrNotAcquired): // the caller gave up
		return 0, nil, err
	case retryable(err):
		return 0, nil, &ambiguousError{err: fmt.Errorf("dynamolock: acquire %q: %w", key, err), sent: sent}
	default:
		return 0, nil, fmt.Errorf("dynamolock: acquire %q: %w", key, err)
	}
	v, err := counter(out.Attributes)
	if err != nil {
		l.undo(key, owner, true, sent.Add(ttl)) // ours, but without a usable token
		return 0, nil, fmt.Errorf("dynamolock: token of %q: %w", key, err)
	}
	return fenced.Token(v), nil, nil
}

// send runs an acquiring UpdateItem. The request has its own context,
// bounded by RequestTimeout and detached from ctx, because a request
// abandoned half-way may still be applied and would then hold the lock
// for nobody until a waiter sees its lease run out. When ctx ends first,
// send returns errors.Join(distlock.ErrNotAcquired, ctx.Err()) at once and
// leaves the request to finish in the background, then gives back
// whatever it may have taken (see giveBack): after a request that got an
// answer, one compare-and-delete settles it; after one that did not, the
// request may still be queued on the server and apply later, so the
// cleanup goes on until it succeeds or the lease written (ttl) would have
// run out.
func (l *Locker) send(ctx context.Context, key, owner string, ttl time.Duration, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	if ctx.Done() == nil { // cannot end: no need to watch it
		rctx, cancel := context.WithTimeout(ctx, l.opts.RequestTimeout)
		defer cancel()
		return l.db.UpdateItem(rctx, in)
	}
	type result struct {
		out *dynamodb.UpdateItemOutput
		err error
	}
	done := make(chan result) // unbuffered: handed over only while send still waits
	abandoned := make(chan struct{})
	sent := time.Now()
	l.bg.Go(func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.RequestTimeout)
		out, err := l.db.UpdateItem(rctx, in)
		cancel()
		select {
		case done <- result{out, err}:
		case <-abandoned:
			// Whatever the answer (a ConditionalCheckFailed may also be
			// the SDK's retry of an attempt that was applied), our owner
			// secret may be on the item.
			l.giveBack(key, owner, err == nil || !retryable(err), sent.Add(ttl))
		}
	})
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		close(abandoned)
		return nil, errors.Join(distlock.ErrNotAcquired, ctx.Err())
	}
}

// undo gives back, in the background, a lock that may be held under owner
// but will not be handed to the caller (see giveBack).
func (l *Locker) undo(key, owner string, answered bool, until time.Time) {
	l.bg.Go(func() { l.giveBack(key, owner, answered, until) })
}

// giveBack removes owner from the lock item if it is there
// (compare-and-delete: never another holder's). When the acquiring request
// was answered, a delete that finds the item not ours settles it.
// Otherwise the request may still be queued on a slow or frozen server and
// be applied after any delete sent now, so giveBack keeps trying, with
// backoff, until a delete removes our owner. Either way it stops at until
// — when the lease the request wrote would have run out, so that a waiter
// may take the lock over — or when DynamoDB refuses the delete (a missing
// table). Each request is bounded by RequestTimeout; Close waits for
// giveBack.
func (l *Locker) giveBack(key, owner string, answered bool, until time.Time) {
	delay := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.RequestTimeout)
		err := l.release(ctx, key, owner)
		cancel()
		switch {
		case err == nil:
			return // it was ours: gone now
		case answered && errors.Is(err, distlock.ErrLeaseLost):
			return // not ours, and our request was answered: nothing to undo
		case !errors.Is(err, distlock.ErrLeaseLost) && !retryable(err):
			return // refused (e.g. the table is gone): nothing more to do
		case !time.Now().Before(until):
			return
		}
		t := time.NewTimer(min(delay, time.Until(until)))
		<-t.C
		delay = min(2*delay, time.Second)
	}
}

// sdkRetryables is the SDK's own classification of retryable errors:
// throttling codes, RequestTimeout codes, HTTP 500/502/503/504.
var sdkRetryables = retry.IsErrorRetryables(retry.DefaultRetryables)

// retryable reports whether a failed request may succeed if sent again —
// and so, for a write, whether it may have been applied unseen. Yes for
// throttling, server faults (5xx), transaction conflicts and every failure
// without an answer from DynamoDB (timeouts, connection errors); no for a
// request DynamoDB refused (validation, missing table, access denied, any
// other client fault) or the SDK could not build.
func retryable(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		var tc *types.TransactionConflictException
		var rwc *types.ReplicatedWriteConflictException
		return ae.ErrorFault() == smithy.FaultServer || errors.As(err, &tc) || errors.As(err, &rwc) ||
			sdkRetryables.IsErrorRetryable(err) == aws.TrueTernary
	}
	var ip *smithy.InvalidParamsError
	var se *smithy.SerializationError
	return !errors.As(err, &ip) && !errors.As(err, &se)
}

func (l *Locker) newLease(ctx context.Context, key, owner string, tok fenced.Token, o distlock.Options, start time.Time) (distlock.Lease, error) {
	l.forget(key)
	if err := ctx.Err(); err != nil {
		// Acquired while the caller gave up: give it back.
		l.undo(key, owner, true, start.Add(o.TTL))
		return nil, errors.Join(distlock.ErrNotAcquired, err)
	}
	lz, err := lease.New(lease.Config{
		Package: pkg, Hooks: observe.FromContext(ctx), CleanupTimeout: l.opts.CleanupTimeout, Group: &l.bg,
		Key: key, Token: tok, TTL: o.TTL, Start: start, AutoExtend: o.AutoExtend,
		Backend: lease.Backend{
			Extend:  func(ctx context.Context, ttl time.Duration) error { return l.beat(ctx, key, owner, ttl) },
			Release: func(ctx context.Context) error { return l.release(ctx, key, owner) },
		},
	})
	if err != nil {
		l.undo(key, owner, true, start.Add(o.TTL)) // e.g. the Locker was closed meanwhile
		return nil, err
	}
	return lz, nil
}

// Close releases the leases of the Locker still held, ends waiting Acquire
// calls (with distlock.ErrClosed), refuses later ones, and waits for every
// cleanup the Locker runs in the background — releases whose callers
// stopped waiting, and the undoing of acquisitions abandoned while their
// request was in flight, which go on until the request's lease would have
// run out (see Acquire) — or until ctx ends. See distlock.Closer for what
// it returns. The DynamoDB client is not closed. A nil Locker's Close
// returns nil.
func (l *Locker) Close(ctx context.Context) error {
	if l == nil || l.db == nil {
		return nil
	}
	return l.bg.Close(ctx, pkg)
}

// reqCtx bounds a heartbeat or release request by RequestTimeout and by
// ctx: these requests are safe to abandon (the lease ends by its own
// deadline; a release that did not happen leaves the lock to expire).
func (l *Locker) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < l.opts.RequestTimeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, l.opts.RequestTimeout)
}

// beat is the heartbeat: a new RVN and lease duration, on the condition
// that the owner is still our secret (see the package doc for why not the
// previous RVN).
func (l *Locker) beat(ctx context.Context, key, owner string, ttl time.Duration) error {
	rctx, cancel := l.reqCtx(ctx)
	defer cancel()
	_, err := l.db.UpdateItem(rctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.opts.Table),
		Key:                       l.itemKey(key),
		UpdateExpression:          aws.String(exprBeat),
		ConditionExpression:       aws.String(condMine),
		ExpressionAttributeNames:  map[string]string{"#owner": AttrOwner, "#rvn": AttrRVN, "#lease": AttrLeaseMS},
		ExpressionAttributeValues: map[string]types.AttributeValue{":owner": str(owner), ":rvn": str(secret()), ":lease": num(leaseMillis(ttl))},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return fmt.Errorf("%w: dynamolock: %q was taken over", distlock.ErrLeaseLost, key)
	case err != nil:
		return fmt.Errorf("dynamolock: heartbeat %q: %w", key, err)
	}
	return nil
}

// release removes the owner if it is still ours; the item and its token
// counter stay.
func (l *Locker) release(ctx context.Context, key, owner string) error {
	rctx, cancel := l.reqCtx(ctx)
	defer cancel()
	_, err := l.db.UpdateItem(rctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.opts.Table),
		Key:                       l.itemKey(key),
		UpdateExpression:          aws.String(exprRelease),
		ConditionExpression:       aws.String(condMine),
		ExpressionAttributeNames:  map[string]string{"#owner": AttrOwner, "#rvn": AttrRVN, "#lease": AttrLeaseMS},
		ExpressionAttributeValues: map[string]types.AttributeValue{":owner": str(owner)},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return fmt.Errorf("%w: dynamolock: %q was taken over", distlock.ErrLeaseLost, key)
	case err != nil:
		return fmt.Errorf("dynamolock: release %q: %w", key, err)
	}
	return nil
}

func itemString(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func itemNumber(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

// counter reads the token counter of an item: 0 when it has none yet.
func counter(item map[string]types.AttributeValue) (int64, error) {
	av, ok := item[AttrToken]
	if !ok {
		return 0, nil
	}
	n, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s is not a number", AttrToken)
	}
	return strconv.ParseInt(n.Value, 10, 64)
}

// leaseMillis is the lease duration written for waiters: ttl in whole
// milliseconds, rounded up, so that a waiter never waits less than the
// holder's TTL (a sub-millisecond TTL is 1, not 0). MaxInt64 ns fits.
func leaseMillis(ttl time.Duration) int64 {
	ms := ttl.Milliseconds()
	if ttl%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// maxLeaseMillis is the longest lease duration a time.Duration can hold.
const maxLeaseMillis = math.MaxInt64 / int64(time.Millisecond)

// itemDuration reads a lease duration in milliseconds. One too long for a
// time.Duration reads as the longest Duration (it must not wrap into a
// short or negative one, which would allow an early takeover).
func itemDuration(item map[string]types.AttributeValue, name string) time.Duration {
	ms, err := strconv.ParseInt(itemNumber(item, name), 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) && ms > 0, err == nil && ms > maxLeaseMillis:
		return time.Duration(math.MaxInt64)
	case err != nil || ms < 0:
		// Unreadable: assume the longest lease anyone would use, so a
		// malformed item delays a takeover instead of allowing an early one.
		return time.Hour
	}
	return time.Duration(ms) * time.Millisecond
}

// CreateTable creates a lock table with a string partition key named
// keyColumn (empty means DefaultKeyColumn), on-demand billing, and waits
// until it is active. client is a *dynamodb.Client (the two methods it
// calls). It returns an error matching concurkit.ErrInvalidArgument for a
// nil client or an empty table name, before any request.
func CreateTable(ctx context.Context, client interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}, table, keyColumn string) error {
	if handle.IsNil(client) {
		return fmt.Errorf("%w: dynamolock: nil client", concurkit.ErrInvalidArgument)
	}
	if table == "" {
		return fmt.Errorf("%w: dynamolock: empty table name", concurkit.ErrInvalidArgument)
	}
	keyAttribute := keyColumn
	if keyAttribute == "" {
		keyAttribute = DefaultKeyColumn
	}
	db := client
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(keyAttribute), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(keyAttribute), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("dynamolock: create table %s: %w", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(db)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		return fmt.Errorf("dynamolock: wait for table %s: %w", table, err)
	}
	return nil
}
