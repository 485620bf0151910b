package dynamodb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/internal/dynamodbapi"
	"github.com/concurkit/concurkit/internal/lease"
)

// API is the part of *dynamodb.Client the locker uses.
type API = dynamodbapi.Updater

// Attribute names of a lock item (besides the partition key).
const (
	AttrOwner   = "owner"    // S: the holder's per-lease secret; absent when free
	AttrRVN     = "rvn"      // S: record version number, new on every write
	AttrLeaseMS = "lease_ms" // N: lease duration in milliseconds
	AttrToken   = "token"    // N: fencing-token counter, never reset
)

// DefaultKeyAttribute is the partition-key attribute name used when
// Options.KeyAttribute is empty.
const DefaultKeyAttribute = "lock_key"

// Default polling delays while waiting for a held lock.
const (
	DefaultPollMin = 2 * time.Millisecond
	DefaultPollMax = 50 * time.Millisecond
)

// ErrNilClient is returned by New for a nil client.
var ErrNilClient = errors.New("dynamodb: nil client")

// Options configure a Locker.
type Options struct {
	// Table is the lock table (required). Its partition key must be a
	// string attribute named KeyAttribute; see CreateTable.
	Table string
	// KeyAttribute is the partition-key attribute; empty means
	// DefaultKeyAttribute.
	KeyAttribute string
	// PollMin and PollMax bound the jittered backoff between attempts of a
	// waiting Acquire. Zero means DefaultPollMin / DefaultPollMax.
	PollMin, PollMax time.Duration
	// RequestTimeout bounds each DynamoDB request made on behalf of a
	// lease (heartbeat, release) when the caller's context has no earlier
	// deadline. Zero means 5s.
	RequestTimeout time.Duration
}

// Locker hands out leases on items of one table. It is safe for
// concurrent use. It remembers, per key, the RVN it last saw and since
// when (on its own clock), so that TryAcquire can also take over a lock
// whose holder stopped heartbeating.
type Locker struct {
	db   API
	opts Options

	mu   sync.Mutex
	seen map[string]observation
}

type observation struct {
	rvn   string
	lease time.Duration
	since time.Time // local, monotonic
}

var _ distlock.Locker = (*Locker)(nil)

// New returns a Locker. It does no I/O. It returns ErrNilClient for a nil
// client and distlock.ErrInvalidOptions for a missing table or negative
// durations.
func New(db API, opts Options) (*Locker, error) {
	if db == nil {
		return nil, ErrNilClient
	}
	switch {
	case opts.Table == "":
		return nil, fmt.Errorf("%w: empty table name", distlock.ErrInvalidOptions)
	case opts.PollMin < 0 || opts.PollMax < 0 || opts.RequestTimeout < 0:
		return nil, fmt.Errorf("%w: negative duration", distlock.ErrInvalidOptions)
	}
	if opts.KeyAttribute == "" {
		opts.KeyAttribute = DefaultKeyAttribute
	}
	if opts.PollMin == 0 {
		opts.PollMin = DefaultPollMin
	}
	if opts.PollMax == 0 {
		opts.PollMax = DefaultPollMax
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	return &Locker{db: db, opts: opts, seen: map[string]observation{}}, nil
}

// Update expressions.
const (
	exprTake = "SET #owner = :owner, #rvn = :rvn, #lease = :lease ADD #token :one"
	// condFree: nobody holds the lock.
	condFree = "attribute_not_exists(#owner)"
	// condTakeover: nothing was written since the waiter saw :seen.
	condTakeover = "#rvn = :seen"
	exprBeat     = "SET #rvn = :rvn, #lease = :lease"
	exprRelease  = "REMOVE #owner, #rvn, #lease"
	condMine     = "#owner = :owner"
)

func (l *Locker) names() map[string]string {
	return map[string]string{"#owner": AttrOwner, "#rvn": AttrRVN, "#lease": AttrLeaseMS, "#token": AttrToken}
}

func (l *Locker) itemKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{l.opts.KeyAttribute: &types.AttributeValueMemberS{Value: key}}
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

// Acquire blocks until the lock is held or ctx ends (then it returns
// errors.Join(distlock.ErrNotAcquired, ctx.Err())). A held lock is taken
// over only after this Locker has watched its RVN stay unchanged for the
// holder's full lease duration. It returns distlock.ErrInvalidKey for an
// empty key, distlock.ErrInvalidOptions for a negative TTL, and SDK errors
// wrapped.
func (l *Locker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := lease.Resolve(key, opts)
	if err != nil {
		return nil, err
	}
	owner := secret() // one secret per call: a retry recognises its own earlier write
	ambiguous := false
	lz, err := lease.Poll(ctx, lease.PollPolicy{Min: l.opts.PollMin, Max: l.opts.PollMax}, func(ctx context.Context) (distlock.Lease, error) {
		lz, err := l.try(ctx, key, o, owner)
		var ae *ambiguousError
		if errors.As(err, &ae) {
			// The write may have been applied: keep trying with the same
			// secret; the next attempt finds out.
			ambiguous = true
			return nil, fmt.Errorf("%w: %w", distlock.ErrNotAcquired, err)
		}
		return lz, err
	})
	if err != nil && ambiguous {
		// Giving up after an attempt of unknown outcome: remove our owner
		// secret if it is there (compare-and-delete, never another's).
		_ = l.release(context.WithoutCancel(ctx), key, owner)
	}
	return lz, err
}

// ambiguousError is a failed request whose write may have been applied.
type ambiguousError struct{ err error }

func (e *ambiguousError) Error() string { return e.err.Error() }
func (e *ambiguousError) Unwrap() error { return e.err }

// TryAcquire makes one attempt and returns distlock.ErrNotAcquired if the
// lock is held — unless this Locker saw the same RVN at least the
// holder's lease duration ago, in which case it takes the lock over.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := lease.Resolve(key, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(distlock.ErrNotAcquired, err)
	}
	owner := secret()
	lz, err := l.try(ctx, key, o, owner)
	var ae *ambiguousError
	if errors.As(err, &ae) {
		_ = l.release(context.WithoutCancel(ctx), key, owner) // see Acquire
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
	if !errors.Is(err, distlock.ErrNotAcquired) || cur == nil {
		return nil, err
	}
	curOwner, rvn, leaseDur := itemString(cur, AttrOwner), itemString(cur, AttrRVN), itemDuration(cur, AttrLeaseMS)
	if curOwner == owner {
		// An earlier attempt of this call was applied but its answer was
		// lost: we hold the lock. Renew it so its validity starts now.
		start = time.Now()
		if err := l.beat(ctx, key, owner, o.TTL); err != nil {
			return nil, err
		}
		v, err := strconv.ParseInt(itemNumber(cur, AttrToken), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: token of %q: %w", key, err)
		}
		return l.newLease(ctx, key, owner, fenced.Token(v), o, start)
	}
	if !l.expired(key, rvn, leaseDur) {
		return nil, distlock.ErrNotAcquired
	}
	start = time.Now()
	tok, _, err = l.take(ctx, key, o.TTL, owner, rvn)
	if err != nil {
		return nil, err
	}
	return l.newLease(ctx, key, owner, tok, o, start)
}

// expired records the observation of rvn and reports whether this Locker
// has seen that same rvn for at least its lease duration.
func (l *Locker) expired(key, rvn string, dur time.Duration) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	ob, ok := l.seen[key]
	if !ok || ob.rvn != rvn {
		l.seen[key] = observation{rvn: rvn, lease: dur, since: now}
		return false
	}
	return now.Sub(ob.since) >= ob.lease
}

func (l *Locker) forget(key string) {
	l.mu.Lock()
	delete(l.seen, key)
	l.mu.Unlock()
}

// take writes the lock item: free → condition attribute_not_exists(owner);
// takeover (seen != "") → condition rvn = seen. It returns the new token,
// or ErrNotAcquired with the current item when the condition failed.
func (l *Locker) take(ctx context.Context, key string, ttl time.Duration, owner, seen string) (fenced.Token, map[string]types.AttributeValue, error) {
	values := map[string]types.AttributeValue{
		":owner": str(owner), ":rvn": str(secret()), ":lease": num(ttl.Milliseconds()), ":one": num(1),
	}
	cond := condFree
	if seen != "" {
		cond = condTakeover
		values[":seen"] = str(seen)
	}
	// The request runs to completion even if ctx is cancelled meanwhile: an
	// abandoned request could still take the lock for nobody.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.RequestTimeout)
	defer cancel()
	out, err := l.db.UpdateItem(rctx, &dynamodb.UpdateItemInput{
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
	case errors.As(err, &ccf):
		return 0, ccf.Item, distlock.ErrNotAcquired
	case err != nil:
		return 0, nil, &ambiguousError{fmt.Errorf("dynamodb: acquire %q: %w", key, err)}
	}
	v, err := strconv.ParseInt(itemNumber(out.Attributes, AttrToken), 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("dynamodb: token of %q: %w", key, err)
	}
	return fenced.Token(v), nil, nil
}

func (l *Locker) newLease(ctx context.Context, key, owner string, tok fenced.Token, o distlock.Options, start time.Time) (distlock.Lease, error) {
	l.forget(key)
	lz, err := lease.New(lease.Config{
		Key: key, Token: tok, TTL: o.TTL, Start: start, AutoExtend: o.AutoExtend,
		Backend: lease.Backend{
			Extend:  func(ctx context.Context, ttl time.Duration) error { return l.beat(ctx, key, owner, ttl) },
			Release: func(ctx context.Context) error { return l.release(ctx, key, owner) },
		},
	})
	if err != nil {
		_ = l.release(context.WithoutCancel(ctx), key, owner)
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		// Acquired while the caller gave up: give it back.
		_ = lz.Release(context.WithoutCancel(ctx))
		return nil, errors.Join(distlock.ErrNotAcquired, err)
	}
	return lz, nil
}

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
		ExpressionAttributeValues: map[string]types.AttributeValue{":owner": str(owner), ":rvn": str(secret()), ":lease": num(ttl.Milliseconds())},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return fmt.Errorf("%w: %q was taken over", distlock.ErrLeaseLost, key)
	case err != nil:
		return fmt.Errorf("dynamodb: heartbeat %q: %w", key, err)
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
		return fmt.Errorf("%w: %q was taken over", distlock.ErrLeaseLost, key)
	case err != nil:
		return fmt.Errorf("dynamodb: release %q: %w", key, err)
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

func itemDuration(item map[string]types.AttributeValue, name string) time.Duration {
	ms, err := strconv.ParseInt(itemNumber(item, name), 10, 64)
	if err != nil || ms < 0 {
		// Unreadable: assume the longest lease anyone would use, so a
		// malformed item delays a takeover instead of allowing an early one.
		return time.Hour
	}
	return time.Duration(ms) * time.Millisecond
}

// CreateTable creates a lock table with a string partition key named
// keyAttribute (empty means DefaultKeyAttribute), on-demand billing, and
// waits until it is active.
func CreateTable(ctx context.Context, db interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}, table, keyAttribute string) error {
	if db == nil {
		return ErrNilClient
	}
	if table == "" {
		return fmt.Errorf("%w: empty table name", distlock.ErrInvalidOptions)
	}
	if keyAttribute == "" {
		keyAttribute = DefaultKeyAttribute
	}
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(keyAttribute), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(keyAttribute), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("dynamodb: create table %s: %w", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(db)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		return fmt.Errorf("dynamodb: wait for table %s: %w", table, err)
	}
	return nil
}
