package fenced

// Default names. A zero field of Table or Fence means its default.
const (
	// DefaultKeyColumn is Table.KeyColumn's default.
	DefaultKeyColumn = "id"
	// DefaultTokenColumn is Table.TokenColumn's default, and the token
	// column of the fence table.
	DefaultTokenColumn = "max_seen_token"
	// DefaultFenceTable is Fence.Name's default (see the migrations):
	//
	//	CREATE TABLE concurkit_fences (resource text PRIMARY KEY, max_seen_token bigint NOT NULL DEFAULT 0)
	DefaultFenceTable = "concurkit_fences"
	// DefaultSequence is the token sequence fencedpg.NewSequence and
	// fencedmysql.NewSequence use when given no name.
	DefaultSequence = "concurkit_fence_token_seq"
)

// fenceResourceColumn is the key column of the fence table.
const fenceResourceColumn = "resource"

// Table names a table whose rows are protected by a fencing-token column.
// Zero fields mean their defaults; only Name is required. The token column
// must be a BIGINT (DynamoDB: a number attribute) that is NOT NULL DEFAULT
// 0 for rows that predate fencing; KeyColumn must be the primary key
// (DynamoDB: the partition key of a table without a sort key).
type Table struct {
	// Schema optionally qualifies Name (PostgreSQL schema, MySQL database).
	// Empty means the connection's default. Unused by DynamoDB.
	Schema string
	// Name is the table name. Required.
	Name string
	// KeyColumn is the primary-key column (DynamoDB: the partition-key
	// attribute, used only with VersionColumn). Default DefaultKeyColumn.
	KeyColumn string
	// TokenColumn holds the highest token seen. Default DefaultTokenColumn.
	TokenColumn string
	// VersionColumn, when set, is a NOT NULL integer version column that
	// every accepted write increments by 1 in the same guarded statement
	// (a row the write inserts gets 1, whatever the column's default: the
	// first version an optimistic compare-and-swap accepts), so that
	// optimistic writers on the same rows see fenced writes as conflicts.
	// Empty (the default) means the table has no version column: fenced
	// writes touch only TokenColumn and the assigned columns.
	VersionColumn string
}

// Fence names the table of fence rows used by the adapters' Admit: one row
// per guarded resource, key column "resource", token column
// DefaultTokenColumn. The zero Fence is DefaultFenceTable in the
// connection's default schema.
type Fence struct {
	// Schema optionally qualifies Name. Empty means the connection's
	// default.
	Schema string
	// Name is the fence table. Default DefaultFenceTable.
	Name string
}

// Table returns the Table of f's rows, defaults applied.
func (f Fence) Table() Table {
	name := f.Name
	if name == "" {
		name = DefaultFenceTable
	}
	return Table{Schema: f.Schema, Name: name, KeyColumn: fenceResourceColumn, TokenColumn: DefaultTokenColumn}
}
