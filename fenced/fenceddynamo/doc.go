// Package fenceddynamo is the DynamoDB (aws-sdk-go-v2) adapter of package
// fenced:
//
//   - Put writes an item in one conditional write that DynamoDB refuses
//     when the item has seen a higher fencing token; with
//     fenced.Table.VersionColumn set it also ADDs 1 to the item's version
//     attribute in the same write, so optimistic compare-and-swap writers
//     on the same items see the fenced write as a conflict.
//   - Counter (NewCounter) is a fenced.Source for locks that cannot mint
//     tokens themselves: an atomic ADD on one item.
//
// Attribute names travel in ExpressionAttributeNames, never inline. The
// package links the AWS SDK only: no pgx, no MySQL driver.
package fenceddynamo
