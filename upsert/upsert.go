package upsert

// DefaultKeyColumn is the key column of a Table whose KeyColumn is empty.
const DefaultKeyColumn = "id"

// contendedError is ErrContended's type.
type contendedError struct{}

// Error returns the message.
func (contendedError) Error() string { return "upsert: conflicting row kept disappearing" }

// ErrorType is the name observe.ErrorType reports.
func (contendedError) ErrorType() string { return "contended" }

// ErrContended is returned by InsertOrGet (and, on MySQL, by Upsert with
// returning columns) when, after MaxReadAttempts tries, the insert kept
// conflicting with a row that the following read could not find (it was
// deleted each time in between). It is not retryable by default: a row
// deleted as fast as it is created is a design problem, not contention to
// wait out.
var ErrContended error = contendedError{}

// MaxReadAttempts bounds how often InsertOrGet (and, on MySQL, Upsert with
// returning columns) runs again when the conflicting row is not visible to
// its read. One extra attempt is enough unless the row is being deleted
// concurrently.
const MaxReadAttempts = 10

// Table describes where rows live. A zero field means its default. Names
// are validated and quoted by each adapter for its dialect (non-empty, at
// most 63 bytes for PostgreSQL and 64 for MySQL, valid UTF-8, no NUL;
// DynamoDB table names follow AWS's rules); an invalid name makes every
// call fail with an error matching concurkit.ErrInvalidArgument, before
// any I/O.
type Table struct {
	// Schema optionally qualifies Name (PostgreSQL schema, MySQL database).
	// Empty means unqualified. Ignored by DynamoDB.
	Schema string
	// Name is the table name (required).
	Name string
	// KeyColumn is the unique key column; empty means DefaultKeyColumn
	// ("id"). DynamoDB: the partition key attribute (tables with a sort key
	// are not supported). Every row must contain it.
	KeyColumn string
}
