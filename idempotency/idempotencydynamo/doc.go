// Package idempotencydynamo keeps idempotency keys in DynamoDB, through
// aws-sdk-go-v2, with conditional writes in the manner of AWS Lambda
// Powertools' idempotency utility (status, expiration,
// in_progress_expiration): its Store is an idempotency.Store for
// idempotency.Middleware, Do and Reap.
//
// A claim is one UpdateItem: its condition admits a new key, an expired
// one, a released one or one whose lock timed out, with the same
// fingerprint; when it fails, DynamoDB returns the blocking item
// (ReturnValuesOnConditionCheckFailure), so a replay or a 409 is one
// request too. Completing or releasing a key is one UpdateItem fenced by
// the claim's lock id. The SDK retries a request whose answer was lost;
// when the first attempt had been applied, the retry's condition fails on
// the call's own write: a completed (released) item under the call's own
// lock id is success, and a claim that finds its own lock is a claim.
//
// Limits: DoPhases needs the phase's writes and the key in one SQL
// transaction, so this Store is not a TxStore (use single-step Do or the
// middleware). An item is at most 400 KB: Complete refuses a larger
// response with idempotency.ErrResponseTooLarge before any request, and
// the key keeps a marker instead (a retry gets 410 Gone and does not run
// again). Expiry is kept in whole seconds (rounded up) in the TTL
// attribute "expiration"; CreateTable turns on DynamoDB's TTL deletion,
// and Reap (a Scan plus conditional deletes) is there for prompt cleanup
// and for DynamoDB Local.
//
// The package imports the AWS SDK and the standard library, nothing of
// pgx or the MySQL driver.
package idempotencydynamo
