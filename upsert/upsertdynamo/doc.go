// Package upsertdynamo is the DynamoDB (aws-sdk-go-v2) adapter of package
// upsert: Insert, Upsert and InsertOrGet, each one call, report whether
// the call created the item. Table is in upsert (Name is the table,
// KeyColumn the partition key attribute; Schema is ignored).
//
// Values are converted with attributevalue.Marshal (string → S, integers
// → N, …); a types.AttributeValue is used as is. Upsert and InsertOrGet
// return the item as stored afterwards.
//
// The package imports the AWS SDK and the standard library, nothing of
// pgx or the MySQL driver.
package upsertdynamo
