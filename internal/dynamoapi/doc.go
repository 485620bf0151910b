// Package dynamoapi defines, once, the subsets of *dynamodb.Client
// (aws-sdk-go-v2) that more than one package accepts, and the value
// conversion they share (Marshal). The public packages re-export the
// interfaces as type aliases with their own documentation. It is kept
// apart from internal/pgxdb and internal/sqldb so that the SQL-only packages do not depend on
// the AWS SDK.
package dynamoapi
