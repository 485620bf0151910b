// Package dbtx defines, once, the query interfaces the SQL packages accept:
// the part of a pool, connection or transaction they use (the shape of
// sqlc's DBTX). The public packages re-export them as type aliases
// (fenced.DBTX, optimistic.SQLDB, ...) with their own documentation, so a
// handle that fits one package fits them all.
package dbtx
