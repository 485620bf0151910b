package ident

import "strings"

// Skeleton replaces every quoted identifier in stmt (quote character q:
// '"' for PostgreSQL, '`' for MySQL; doubled inside an identifier) by a
// bare q q pair, and reports false if a quote is left open. Two statements
// with the same skeleton differ only inside quoted identifiers, so the
// statement builders' fuzz tests use it to show that caller-supplied names
// cannot change the SQL around them.
func Skeleton(stmt string, q byte) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(stmt); i++ {
		if stmt[i] != q {
			b.WriteByte(stmt[i])
			continue
		}
		for i++; ; i++ {
			if i >= len(stmt) {
				return "", false
			}
			if stmt[i] == q {
				if i+1 < len(stmt) && stmt[i+1] == q {
					i++
					continue
				}
				break
			}
		}
		b.WriteByte(q)
		b.WriteByte(q)
	}
	return b.String(), true
}
