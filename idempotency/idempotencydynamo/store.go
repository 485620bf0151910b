package idempotencydynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/internal/wire"
	"github.com/concurkit/concurkit/internal/dynamoapi"
	"github.com/concurkit/concurkit/internal/handle"
	"github.com/concurkit/concurkit/internal/ident"
)

const pkg = "idempotencydynamo"

// Client is the part of *dynamodb.Client (aws-sdk-go-v2) the Store uses:
// UpdateItem for claims and completions, Scan and DeleteItem for Reap.
type Client = dynamoapi.UpdateScanDeleter

var (
	_ Client            = (*dynamodb.Client)(nil)
	_ idempotency.Store = (*Store)(nil)
)

// Attribute names of a key item. The partition key is AttrID, a string
// made of the principal's length, the principal and the key
// ("5:acme|order-1"), so that no two (principal, key) pairs share an id.
// The names of the status and expiry attributes are those of AWS Lambda
// Powertools' idempotency table.
const (
	AttrID                   = "id"
	attrPrincipal            = "principal"
	attrKey                  = "idempotency_key"
	attrFingerprint          = "fingerprint"            // B: SHA-256 of the request
	attrStatus               = "status"                 // S: INPROGRESS, COMPLETED or RELEASED
	attrLockID               = "lock_id"                // N: random id of the last claim; fences its writes
	attrAttempts             = "attempts"               // N: runs since the key was created
	attrLockedAt             = "locked_at"              // N: Unix ms, while INPROGRESS
	attrInProgressExpiration = "in_progress_expiration" // N: Unix ms, locked_at + lock timeout
	attrRecoveryPoint        = "recovery_point"         // S: "started" or "finished"
	attrResponseStatus       = "response_status"        // N
	attrResponseHeaders      = "response_headers"       // S: JSON object
	attrResponseBody         = "response_body"          // B (absent when empty)
	attrCreatedAt            = "created_at"             // N: Unix ms
	attrLastRunAt            = "last_run_at"            // N: Unix ms
	// AttrExpiration is the expiry in Unix seconds, the table's TTL
	// attribute (see CreateTable).
	AttrExpiration = "expiration"
)

// Values of attrStatus.
const (
	statusInProgress = "INPROGRESS"
	statusCompleted  = "COMPLETED"
	statusReleased   = "RELEASED"
)

// names maps the expression placeholders to the attribute names; every
// expression uses placeholders ("status" is a reserved word).
var names = map[string]string{
	"#id": AttrID, "#principal": attrPrincipal, "#key": attrKey, "#fp": attrFingerprint,
	"#status": attrStatus, "#lock": attrLockID, "#attempts": attrAttempts, "#lockedAt": attrLockedAt,
	"#ipe": attrInProgressExpiration, "#rp": attrRecoveryPoint, "#rs": attrResponseStatus,
	"#rh": attrResponseHeaders, "#rb": attrResponseBody, "#created": attrCreatedAt,
	"#lastRun": attrLastRunAt, "#exp": AttrExpiration,
}

// namesFor returns the placeholders an expression uses (DynamoDB rejects
// unused ones).
func namesFor(placeholders ...string) map[string]string {
	m := make(map[string]string, len(placeholders))
	for _, p := range placeholders {
		m[p] = names[p]
	}
	return m
}

// Expressions.
const (
	// claimUpdate takes the key for this call; if_not_exists keeps the
	// creation time and counts runs of an existing item.
	claimUpdate = "SET #principal = :principal, #key = :key, #fp = :fp, #status = :inprogress, #lock = :lock, " +
		"#lockedAt = :nowMs, #ipe = :deadline, #rp = :started, #lastRun = :nowMs, #exp = :exp, " +
		"#created = if_not_exists(#created, :nowMs), #attempts = if_not_exists(#attempts, :zero) + :one " +
		"REMOVE #rs, #rh, #rb"
	// claimCondition: new, expired, released with the same fingerprint, or
	// in progress with the same fingerprint and a timed-out lock. A
	// completed item is claimable only once expired.
	claimCondition = "attribute_not_exists(#id) OR #exp <= :nowS OR (#fp = :fp AND (#status = :released OR " +
		"(#status = :inprogress AND #ipe <= :nowMs)))"
	// resetUpdate fixes an item claimed after it expired: a new key.
	resetUpdate = "SET #attempts = :one, #created = :nowMs"
	// held: the lock is still this call's.
	held           = "#lock = :lock AND #status = :inprogress"
	completeUpdate = "SET #status = :completed, #rp = :finished, #rs = :rs, #rh = :rh, #exp = :exp REMOVE #ipe, #lockedAt"
	releaseUpdate  = "SET #status = :released REMOVE #ipe, #lockedAt"
	expired        = "#exp <= :nowS"
)

// Config configures a Store. A nil *Config, and every zero field, means
// the documented default.
type Config struct {
	// Table is the key table: Table.Name, default
	// idempotency.DefaultTable (see CreateTable); Schema is ignored.
	Table idempotency.Table
}

// Store keeps idempotency keys in a DynamoDB table, with conditional
// writes: a claim is one UpdateItem whose condition lets exactly one of
// concurrent claims through and returns the existing item to the others.
// It implements idempotency.Store (for idempotency.Middleware, Do and
// Reap), not TxStore: DoPhases needs the key and the phase's writes in one
// SQL transaction. It is safe for concurrent use.
type Store struct {
	db    Client
	table *string
}

// New returns a Store on client's table. It does no I/O. Errors match
// concurkit.ErrInvalidArgument: a nil client, an invalid table name.
func New(client Client, cfg *Config) (*Store, error) {
	if handle.IsNil(client) {
		return nil, fmt.Errorf("%w: %s: nil client", concurkit.ErrInvalidArgument, pkg)
	}
	name := wire.DefaultTable
	if cfg != nil && cfg.Table.Name != "" {
		name = cfg.Table.Name
	}
	if err := ident.DynamoDBTable(name); err != nil {
		return nil, fmt.Errorf("%w: %s: table: %v", concurkit.ErrInvalidArgument, pkg, err)
	}
	return &Store{db: client, table: aws.String(name)}, nil
}

// itemID is the partition key of (principal, key).
func itemID(principal, key string) string {
	return strconv.Itoa(len(principal)) + ":" + principal + "|" + key
}

func key(principal, k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrID: str(itemID(principal, k))}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func bin(b []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: b} }

// seconds is t in Unix seconds, rounded up: a key never expires early.
func seconds(t time.Time) int64 {
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

// Claim implements idempotency.Store in one UpdateItem (ALL_OLD both
// ways: the item before a successful claim, the blocking item after a
// failed one), plus a second, fenced UpdateItem in the rare case that the
// claim replaced an expired item (its run count and creation time
// restart).
func (s *Store) Claim(ctx context.Context, r idempotency.ClaimRequest) (idempotency.Record, error) {
	nowMs := r.Now.UnixMilli()
	exp := seconds(r.ExpiresAt())
	values := map[string]types.AttributeValue{
		":principal": str(r.Principal), ":key": str(r.Key), ":fp": bin(r.Fingerprint),
		":inprogress": str(statusInProgress), ":released": str(statusReleased), ":lock": num(r.LockID),
		":nowMs": num(nowMs), ":deadline": num(r.Now.Add(r.LockTimeout).UnixMilli()),
		":started": str(idempotency.Started), ":exp": num(exp), ":zero": num(0), ":one": num(1),
		":nowS": num(r.Now.Unix()),
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           s.table,
		Key:                 key(r.Principal, r.Key),
		UpdateExpression:    aws.String(claimUpdate),
		ConditionExpression: aws.String(claimCondition),
		ExpressionAttributeNames: namesFor("#id", "#principal", "#key", "#fp", "#status", "#lock", "#lockedAt",
			"#ipe", "#rp", "#lastRun", "#exp", "#created", "#attempts", "#rs", "#rh", "#rb"),
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		rec, err := record(ccf.Item)
		if err != nil {
			return rec, fmt.Errorf("%s: claim: %w", pkg, err)
		}
		return rec, nil
	}
	if err != nil {
		return idempotency.Record{}, wire.Err(ctx, pkg, "claim", err)
	}
	rec := idempotency.Record{
		Principal: r.Principal, Key: r.Key, Fingerprint: r.Fingerprint, LockID: r.LockID, LockedAt: time.UnixMilli(nowMs),
		RecoveryPoint: idempotency.Started, Attempts: 1, CreatedAt: time.UnixMilli(nowMs), LastRunAt: time.UnixMilli(nowMs),
		ExpiresAt: time.Unix(exp, 0),
	}
	if len(out.Attributes) == 0 {
		return rec, nil // a new item
	}
	old, err := record(out.Attributes)
	if err != nil {
		return rec, fmt.Errorf("%s: claim: %w", pkg, err)
	}
	if old.ExpiresAt.After(r.Now) { // resumed: one more run of the same key
		rec.Attempts, rec.CreatedAt = old.Attempts+1, old.CreatedAt
		return rec, nil
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 s.table,
		Key:                       key(r.Principal, r.Key),
		UpdateExpression:          aws.String(resetUpdate),
		ConditionExpression:       aws.String(held),
		ExpressionAttributeNames:  namesFor("#attempts", "#created", "#lock", "#status"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1), ":nowMs": num(nowMs), ":lock": num(r.LockID), ":inprogress": str(statusInProgress)},
	})
	if err != nil {
		return rec, wire.Err(ctx, pkg, "claim: reset expired key", err)
	}
	return rec, nil
}

// record decodes an item.
func record(item map[string]types.AttributeValue) (idempotency.Record, error) {
	var rec idempotency.Record
	if len(item) == 0 {
		return rec, errors.New("no item")
	}
	getS := func(name string) string {
		v, _ := item[name].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	var bad error
	getN := func(name string) int64 {
		v, _ := item[name].(*types.AttributeValueMemberN)
		if v == nil {
			return 0
		}
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil && bad == nil {
			bad = fmt.Errorf("attribute %s: %w", name, err)
		}
		return n
	}
	getB := func(name string) []byte {
		v, _ := item[name].(*types.AttributeValueMemberB)
		if v == nil {
			return nil
		}
		return v.Value
	}
	rec.Principal, rec.Key, rec.Fingerprint = getS(attrPrincipal), getS(attrKey), getB(attrFingerprint)
	rec.LockID, rec.Attempts, rec.RecoveryPoint = getN(attrLockID), getN(attrAttempts), getS(attrRecoveryPoint)
	rec.CreatedAt, rec.LastRunAt = time.UnixMilli(getN(attrCreatedAt)), time.UnixMilli(getN(attrLastRunAt))
	rec.ExpiresAt = time.Unix(getN(AttrExpiration), 0)
	status := getS(attrStatus)
	if status == statusInProgress {
		rec.LockedAt = time.UnixMilli(getN(attrLockedAt))
	}
	if status == statusCompleted {
		h, err := wire.ParseHeader([]byte(getS(attrResponseHeaders)))
		if err != nil {
			return rec, err
		}
		rec.Response = &idempotency.Response{Status: int(getN(attrResponseStatus)), Header: h, Body: getB(attrResponseBody)}
	}
	return rec, bad
}

// fenced runs an UpdateItem conditional on the lock being l's, which moves
// the item to status done. When the condition fails on an item that is
// already done under l's lock id, the write is this call's own: the SDK
// retried a request whose first attempt DynamoDB had applied (its answer
// lost), and only l could have made that change. That is success, not a
// lost lock.
func (s *Store) fenced(ctx context.Context, op string, l idempotency.Lock, done, update string, placeholders []string, values map[string]types.AttributeValue) error {
	values[":lock"], values[":inprogress"] = num(l.ID), str(statusInProgress)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 key(l.Principal, l.Key),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(held),
		ExpressionAttributeNames:            namesFor(append(placeholders, "#lock", "#status")...),
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		lock, _ := ccf.Item[attrLockID].(*types.AttributeValueMemberN)
		status, _ := ccf.Item[attrStatus].(*types.AttributeValueMemberS)
		if lock != nil && status != nil && lock.Value == strconv.FormatInt(l.ID, 10) && status.Value == done {
			return nil
		}
		return fmt.Errorf("%s: %s: %w", pkg, op, idempotency.ErrLockLost)
	}
	if err != nil {
		return wire.Err(ctx, pkg, op, err)
	}
	return nil
}

// Item sizes: DynamoDB refuses an item over 400 KB, attribute names
// included. itemOverhead bounds what a completed item holds besides its
// body, headers, principal and key (three times each: the id and two
// attributes): the attribute names, the fingerprint, the numbers, the
// status and recovery point (about 350 bytes).
const (
	maxItemBytes = 400 * 1024
	itemOverhead = 1024
)

// Complete implements idempotency.Store. An item is at most 400 KB: a
// response that would make it larger is refused before any request with
// an error matching idempotency.ErrResponseTooLarge.
func (s *Store) Complete(ctx context.Context, l idempotency.Lock, resp idempotency.Response, expiresAt time.Time) error {
	h, err := wire.Header(resp.Header)
	if err != nil {
		return fmt.Errorf("%s: complete: %w", pkg, err)
	}
	if size := len(resp.Body) + len(h) + 3*(len(l.Principal)+len(l.Key)) + itemOverhead; size > maxItemBytes {
		return fmt.Errorf("%s: complete: %w: an item of about %d bytes, over DynamoDB's %d", pkg, idempotency.ErrResponseTooLarge, size, maxItemBytes)
	}
	update := completeUpdate
	placeholders := []string{"#rp", "#rs", "#rh", "#exp", "#ipe", "#lockedAt"}
	values := map[string]types.AttributeValue{
		":completed": str(statusCompleted), ":finished": str(idempotency.Finished),
		":rs": num(int64(resp.Status)), ":rh": str(string(h)), ":exp": num(seconds(expiresAt)),
	}
	if len(resp.Body) > 0 {
		update = "SET #rb = :rb, " + update[len("SET "):]
		placeholders = append(placeholders, "#rb")
		values[":rb"] = bin(resp.Body)
	}
	return s.fenced(ctx, "complete", l, statusCompleted, update, placeholders, values)
}

// Release implements idempotency.Store.
func (s *Store) Release(ctx context.Context, l idempotency.Lock) error {
	return s.fenced(ctx, "release", l, statusReleased, releaseUpdate, []string{"#ipe", "#lockedAt"},
		map[string]types.AttributeValue{":released": str(statusReleased)})
}

// Reap implements idempotency.Store: a consistent Scan for items expired
// at now, then a DeleteItem for each, conditional on its still being
// expired (a claim may have renewed it meanwhile). DynamoDB's own TTL
// deletion (see CreateTable) makes it optional on AWS.
func (s *Store) Reap(ctx context.Context, now time.Time, limit int) (int, error) {
	nowS := map[string]types.AttributeValue{":nowS": num(now.Unix())}
	var ids []types.AttributeValue
	var start map[string]types.AttributeValue
	for len(ids) < limit {
		out, err := s.db.Scan(ctx, &dynamodb.ScanInput{
			TableName:                 s.table,
			ConsistentRead:            aws.Bool(true),
			FilterExpression:          aws.String(expired),
			ProjectionExpression:      aws.String("#id"),
			ExpressionAttributeNames:  namesFor("#id", "#exp"),
			ExpressionAttributeValues: nowS,
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return 0, wire.Err(ctx, pkg, "reap: scan", err)
		}
		for _, it := range out.Items {
			if len(ids) < limit {
				ids = append(ids, it[AttrID])
			}
		}
		if start = out.LastEvaluatedKey; len(start) == 0 {
			break
		}
	}
	deleted := 0
	for _, id := range ids {
		_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 s.table,
			Key:                       map[string]types.AttributeValue{AttrID: id},
			ConditionExpression:       aws.String(expired),
			ExpressionAttributeNames:  namesFor("#exp"),
			ExpressionAttributeValues: nowS,
		})
		if _, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
			continue
		}
		if err != nil {
			return deleted, wire.Err(ctx, pkg, "reap: delete", err)
		}
		deleted++
	}
	return deleted, nil
}

// CreateTable creates a key table named table (empty means
// idempotency.DefaultTable) with the string partition key AttrID and
// on-demand billing, waits until it is active, and turns on DynamoDB's TTL
// on AttrExpiration, so that DynamoDB deletes expired keys by itself
// (within days, on AWS; a claim treats them as absent at once). client is
// a *dynamodb.Client. It returns an error matching
// concurkit.ErrInvalidArgument for a nil client or an invalid name, before
// any request.
func CreateTable(ctx context.Context, client interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}, table string) error {
	if handle.IsNil(client) {
		return fmt.Errorf("%w: %s: nil client", concurkit.ErrInvalidArgument, pkg)
	}
	if table == "" {
		table = wire.DefaultTable
	}
	if err := ident.DynamoDBTable(table); err != nil {
		return fmt.Errorf("%w: %s: table: %v", concurkit.ErrInvalidArgument, pkg, err)
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(AttrID), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(AttrID), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return wire.Err(ctx, pkg, "create table "+table, err)
	}
	w := dynamodb.NewTableExistsWaiter(client)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		return wire.Err(ctx, pkg, "wait for table "+table, err)
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(AttrExpiration), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return wire.Err(ctx, pkg, "enable TTL on "+table, err)
	}
	return nil
}
