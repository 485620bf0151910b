// Package ident validates and quotes SQL identifiers (schema, table and
// column names) given by callers, so that concurkit never splices an
// unchecked name into SQL text.
//
// Rules shared by both dialects: a name is non-empty, valid UTF-8 and
// contains no NUL byte. PostgreSQL truncates names longer than 63 bytes
// (NAMEDATALEN-1) silently, so Postgres rejects them instead; MySQL and
// MariaDB allow 64 characters, which MySQL checks as 64 bytes (stricter, never
// wrong), and MySQL additionally rejects names that end with a space and
// characters outside the Basic Multilingual Plane, which the server itself
// refuses. Every rejection wraps ErrInvalid.
//
// Quoting follows the server's own rules: PostgreSQL wraps each part in
// double quotes with embedded double quotes doubled (the same output as
// pgx.Identifier{...}.Sanitize()); MySQL wraps each part in backticks with
// embedded backticks doubled. Parts are joined with a dot, so
// Postgres("app", "jobs") is "app"."jobs".
//
// The package is internal: optimistic, upsert, fenced and pessimistic use
// it. It imports only the standard library, so that a MySQL or DynamoDB
// adapter never links pgx through it.
package ident
