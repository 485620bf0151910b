// Package optimisticdynamo is the DynamoDB (aws-sdk-go-v2) adapter of
// package optimistic: Update is the version-checked compare-and-swap of
// one item, one UpdateItem call. The types, sentinels and the retry loop
// are in optimistic.
//
// The UpdateItem carries the condition attribute_exists(key) AND
// version = expected and ReturnValuesOnConditionCheckFailure ALL_OLD: a
// failed check that returns the old item is a conflict, one that returns
// nothing means the item is missing. DynamoDB has no multi-item
// transaction helper in concurkit; TransactWriteItems with the same
// conditions is the tool for that.
//
// The package imports the AWS SDK and the standard library, nothing of
// pgx or the MySQL driver.
package optimisticdynamo
