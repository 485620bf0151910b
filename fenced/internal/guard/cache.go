package guard

import (
	"hash/maphash"
	"maps"
	"slices"
	"sync"

	"github.com/concurkit/concurkit/fenced"
)

// Stmt is a guarded statement built and quoted once for a Table and a set
// of assigned columns.
type Stmt struct {
	SQL      string   // the guarded statement
	Read     string   // the token read-back, if the dialect needs one
	Columns  []string // the assigned columns, sorted: the order of the values
	Resource string   // the table as reported in events and errors
	// Touch, if the dialect needs it, lowers the row's token by one and
	// raises it back (fencedmysql: to put the row in a Galera write set).
	Touch [2]string
}

// Args returns the statement's arguments: first, then the values of set in
// Columns order, then last. set must have exactly Columns as keys (Get
// checks this).
func (s *Stmt) Args(set map[string]any, first []any, last ...any) []any {
	args := make([]any, 0, len(first)+len(s.Columns)+len(last))
	args = append(args, first...)
	for _, c := range s.Columns {
		args = append(args, set[c])
	}
	return append(args, last...)
}

// MaxCached bounds a Cache: when it holds this many statements, the next
// new one empties it first. Programs use a handful of (table, columns)
// shapes; the bound only matters for a program that builds column sets
// from data, which then pays the build cost it would pay without a cache.
const MaxCached = 1024

// Cache maps (Table, assigned columns) to a built Stmt. The zero Cache is
// ready; it is safe for concurrent use. Lookups do not allocate: the key is
// the Table and an order-independent hash of the column names, and a hit
// is checked against the entry's column list, so a hash collision costs a
// rebuild, never a wrong statement.
type Cache struct {
	mu sync.RWMutex
	m  map[cacheKey]*Stmt
}

type cacheKey struct {
	t fenced.Table
	n int
	h uint64
}

var seed = maphash.MakeSeed()

// Get returns the statement for t and the keys of set, from the cache or
// built by build(t, sorted column names). Build errors are returned and not
// cached.
func (c *Cache) Get(t fenced.Table, set map[string]any, build func(t fenced.Table, cols []string) (*Stmt, error)) (*Stmt, error) {
	k := cacheKey{t: t, n: len(set)}
	for col := range set {
		// A sum is independent of map order; collisions are caught below.
		k.h += maphash.String(seed, col)
	}
	c.mu.RLock()
	s := c.m[k]
	c.mu.RUnlock()
	if s != nil && sameColumns(s.Columns, set) {
		return s, nil
	}
	s, err := build(t, slices.Sorted(maps.Keys(set)))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= MaxCached {
		c.m = make(map[cacheKey]*Stmt)
	}
	c.m[k] = s
	c.mu.Unlock()
	return s, nil
}

func sameColumns(cols []string, set map[string]any) bool {
	if len(cols) != len(set) {
		return false
	}
	for _, c := range cols {
		if _, ok := set[c]; !ok {
			return false
		}
	}
	return true
}

// Len returns the number of cached statements (for tests).
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
