package fenced

import (
	"errors"
	"fmt"
)

// Default column names of a Guard.
const (
	DefaultKeyColumn   = "id"
	DefaultTokenColumn = "max_seen_token"
)

// Errors returned for unusable arguments.
var (
	// ErrInvalidGuard: an empty or invalid table, column or sequence name,
	// a duplicate column, or a Set that targets the key or token column.
	ErrInvalidGuard = errors.New("fenced: invalid guard")
	// ErrNilHandle: a nil database or client handle, including an
	// interface holding a nil pointer (a nil *pgxpool.Pool, *sql.DB or
	// *dynamodb.Client). It is returned before any I/O.
	ErrNilHandle = errors.New("fenced: nil handle")
	// ErrNotFound: UpdatePostgres or UpdateMySQL found no row with the key.
	ErrNotFound = errors.New("fenced: row not found")
)

// Guard names a table whose rows are protected by a fencing-token column.
// The zero values of KeyColumn and TokenColumn mean DefaultKeyColumn and
// DefaultTokenColumn. The token column must be a BIGINT (DynamoDB: a
// number attribute) that is NOT NULL DEFAULT 0 for existing rows (see the
// package's migration SQL); KeyColumn must be the primary key.
type Guard struct {
	// Schema optionally qualifies Table (PostgreSQL schema, MySQL
	// database). Empty means the connection's default.
	Schema string
	// Table is required. For DynamoDB it is the table name.
	Table string
	// KeyColumn is the primary-key column. Unused by PutDynamoDB.
	KeyColumn string
	// TokenColumn holds the highest token seen (DynamoDB: the attribute).
	TokenColumn string
}

// Set is one column assignment of a guarded write.
type Set struct {
	Column string
	Value  any
}

// resolved is a Guard with defaults applied and every name checked.
type resolved struct {
	table   []string // schema (optional) and table
	key     string
	token   string
	columns []string
	values  []any
}

// resolve applies defaults and checks the names that every dialect shares;
// the dialect's quoting function validates each name again.
func (g Guard) resolve(set []Set) (resolved, error) {
	r := resolved{key: g.KeyColumn, token: g.TokenColumn}
	if g.Table == "" {
		return r, fmt.Errorf("%w: empty table name", ErrInvalidGuard)
	}
	if g.Schema != "" {
		r.table = []string{g.Schema, g.Table}
	} else {
		r.table = []string{g.Table}
	}
	if r.key == "" {
		r.key = DefaultKeyColumn
	}
	if r.token == "" {
		r.token = DefaultTokenColumn
	}
	if r.key == r.token {
		return r, fmt.Errorf("%w: key and token column are both %q", ErrInvalidGuard, r.key)
	}
	seen := map[string]bool{r.key: true, r.token: true}
	for _, s := range set {
		if s.Column == "" {
			return r, fmt.Errorf("%w: empty column name", ErrInvalidGuard)
		}
		if seen[s.Column] {
			return r, fmt.Errorf("%w: column %q assigned twice or is the key/token column", ErrInvalidGuard, s.Column)
		}
		seen[s.Column] = true
		r.columns = append(r.columns, s.Column)
		r.values = append(r.values, s.Value)
	}
	return r, nil
}

// quoted applies a dialect's quoting to every name of r.
type quoted struct {
	table, key, token string
	columns           []string
}

func (r resolved) quote(q func(parts ...string) (string, error)) (quoted, error) {
	var out quoted
	var err error
	if out.table, err = q(r.table...); err != nil {
		return out, fmt.Errorf("%w: table: %w", ErrInvalidGuard, err)
	}
	if out.key, err = q(r.key); err != nil {
		return out, fmt.Errorf("%w: key column: %w", ErrInvalidGuard, err)
	}
	if out.token, err = q(r.token); err != nil {
		return out, fmt.Errorf("%w: token column: %w", ErrInvalidGuard, err)
	}
	for _, c := range r.columns {
		qc, err := q(c)
		if err != nil {
			return out, fmt.Errorf("%w: column: %w", ErrInvalidGuard, err)
		}
		out.columns = append(out.columns, qc)
	}
	return out, nil
}

// prepare checks token and set against g and quotes every name with the
// dialect's q (ident.Postgres, ident.MySQL). It returns the quoted names
// and the values of set in column order, ErrInvalidToken or
// ErrInvalidGuard.
func (g Guard) prepare(token Token, set []Set, q func(parts ...string) (string, error)) (quoted, []any, error) {
	if err := checkToken(token); err != nil {
		return quoted{}, nil, err
	}
	r, err := g.resolve(set)
	if err != nil {
		return quoted{}, nil, err
	}
	qd, err := r.quote(q)
	if err != nil {
		return quoted{}, nil, err
	}
	return qd, r.values, nil
}

func checkToken(t Token) error {
	if !t.Valid() {
		return fmt.Errorf("%w: %d", ErrInvalidToken, int64(t))
	}
	return nil
}

// staleOrSame interprets the token found in the row after a write that
// changed nothing: equal means the same holder wrote identical values
// (accepted), higher means a successor fenced us out. The stored token
// never decreases, so a value equal to ours proves the guard passed.
func staleOrSame(stored, token Token) error {
	if stored == token {
		return nil
	}
	return fmt.Errorf("%w: token %d, storage has seen %d", ErrStaleToken, int64(token), int64(stored))
}
