package ident

import "fmt"

// Limits of DynamoDB names.
const (
	MinDynamoDBTable     = 3
	MaxDynamoDBTable     = 255
	MaxDynamoDBAttribute = 255 // the limit for key attributes; used for all
)

// DynamoDBTable checks a DynamoDB table name: 3 to 255 characters from
// [A-Za-z0-9_.-]. DynamoDB names are never spliced into expressions (they
// travel in their own request field), so there is nothing to quote. It
// returns nil or an error wrapping ErrInvalid.
func DynamoDBTable(name string) error {
	if len(name) < MinDynamoDBTable || len(name) > MaxDynamoDBTable {
		return fmt.Errorf("%w: dynamodb table name %q must be %d to %d characters", ErrInvalid, truncate(name), MinDynamoDBTable, MaxDynamoDBTable)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("%w: dynamodb table name %q has character %q outside [A-Za-z0-9_.-]", ErrInvalid, name, c)
		}
	}
	return nil
}

// DynamoDBAttribute checks a DynamoDB attribute name: non-empty, at most
// 255 bytes (DynamoDB's limit for key attributes, applied to all), valid
// UTF-8, no NUL. Callers pass attribute names through
// ExpressionAttributeNames placeholders, never inline. It returns nil or an
// error wrapping ErrInvalid.
func DynamoDBAttribute(name string) error {
	if err := validate(name, MaxDynamoDBAttribute); err != nil {
		return fmt.Errorf("dynamodb attribute: %w", err)
	}
	return nil
}
