// Package migrations ships the SQL schema concurkit needs, for PostgreSQL
// and MariaDB/MySQL, as golang-migrate files embedded in the binary, plus a
// generator of migration templates that add a version column (optimistic
// locking) and a fencing column (max_seen_token) to a table of your own.
//
// Apply them with Up, roll back with Down, or copy the files under
// postgres/ and mysql/ into your own migration directory. Every migration
// has an up and a down file; Up then Down then Up is clean.
package migrations
