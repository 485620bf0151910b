// Package redact hides the passwords in connection strings before they reach
// an error message or a log: PostgreSQL URLs and key=value DSNs, MySQL DSNs
// (user:pass@tcp(host)/db), and any scheme://user:pass@host URL (Redis,
// etcd, HTTP endpoints).
//
// It errs on the side of hiding too much: a connection string it cannot
// parse is still redacted by the shape of its user-info part, and a password
// that contains unescaped '@', ':', '/' or '%' is hidden whole.
package redact
