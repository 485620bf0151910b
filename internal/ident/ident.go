package ident

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Maximum identifier lengths in bytes.
const (
	// MaxPostgres is PostgreSQL's NAMEDATALEN-1: longer names are truncated
	// by the server, which would silently address another object.
	MaxPostgres = 63
	// MaxMySQL is the MySQL/MariaDB limit for table and column names
	// (64 characters; checked here as bytes).
	MaxMySQL = 64
)

// ErrInvalid is wrapped by every error that rejects an identifier.
var ErrInvalid = errors.New("ident: invalid identifier")

// Validate checks the rules every dialect shares: name is non-empty, at
// most MaxPostgres bytes (the smaller of the two limits, so a name that
// passes works on both servers), valid UTF-8 and free of NUL bytes. It
// returns nil or an error wrapping ErrInvalid.
func Validate(name string) error {
	return validate(name, MaxPostgres)
}

func validate(name string, maxLen int) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalid)
	case len(name) > maxLen:
		return fmt.Errorf("%w: %q is %d bytes, more than %d", ErrInvalid, truncate(name), len(name), maxLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalid, name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: %q contains a NUL byte", ErrInvalid, name)
	}
	return nil
}

// truncate shortens a long name for error messages.
func truncate(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "..."
}

// Postgres validates each part (Validate's rules) and returns the parts
// quoted for PostgreSQL and joined by dots, e.g. "app"."jobs". It returns
// an error wrapping ErrInvalid when there are no parts or a part is invalid.
func Postgres(parts ...string) (string, error) {
	if len(parts) == 0 {
		return "", fmt.Errorf("%w: no name parts", ErrInvalid)
	}
	for i, p := range parts {
		if err := validate(p, MaxPostgres); err != nil {
			return "", fmt.Errorf("postgres name part %d: %w", i, err)
		}
	}
	// The same output as pgx.Identifier(parts).Sanitize() (the NUL
	// stripping it also does is moot after validation), written out here so
	// that this package, and the MySQL and DynamoDB adapters that use it,
	// do not link pgx.
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(p, `"`, `""`))
		b.WriteByte('"')
	}
	return b.String(), nil
}

// MySQL validates each part for MySQL/MariaDB (non-empty, at most MaxMySQL
// bytes, valid UTF-8, no NUL, no trailing space, only Basic Multilingual
// Plane characters) and returns the parts quoted with backticks and joined
// by dots, e.g. `app`.`jobs`. It returns an error wrapping ErrInvalid when
// there are no parts or a part is invalid.
func MySQL(parts ...string) (string, error) {
	if len(parts) == 0 {
		return "", fmt.Errorf("%w: no name parts", ErrInvalid)
	}
	var b strings.Builder
	for i, p := range parts {
		if err := validateMySQL(p); err != nil {
			return "", fmt.Errorf("mysql name part %d: %w", i, err)
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteByte('`')
		b.WriteString(strings.ReplaceAll(p, "`", "``"))
		b.WriteByte('`')
	}
	return b.String(), nil
}

func validateMySQL(name string) error {
	if err := validate(name, MaxMySQL); err != nil {
		return err
	}
	if strings.HasSuffix(name, " ") {
		return fmt.Errorf("%w: %q ends with a space", ErrInvalid, name)
	}
	for _, r := range name {
		if r > 0xFFFF {
			return fmt.Errorf("%w: %q has a character outside the Basic Multilingual Plane", ErrInvalid, name)
		}
	}
	return nil
}
