package redact

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Mask replaces each hidden password.
const Mask = "xxxxx"

// span is the byte range [from, to) of one password in a string.
type span struct{ from, to int }

// DSN returns s with every password replaced by Mask:
//
//   - the password of a user-info part, "user:PASS@host" — after an optional
//     "scheme://" (postgres, mysql, redis, http URLs) or at the start (MySQL
//     DSNs such as "user:PASS@tcp(host:3306)/db"). The user info ends at the
//     last '@', so a password with an unescaped '@', ':' or '/' is hidden
//     whole; if a later part of the string holds an '@' too, more than the
//     password is hidden, never less. One string is both: a MySQL DSN
//     whose password starts with "//" after a user that could be a URL
//     scheme reads as that URL ("u://x@tcp(h)/db": user x, no password)
//     and is not redacted;
//   - the value of a password parameter (password=, passwd=, pwd=, any
//     case) in a key=value DSN ("host=h password='s e c' user=u", the value
//     quoted or ending at white space) or in a URL query ("?password=PASS",
//     ending at '&').
//
// Strings without a password come back unchanged.
func DSN(s string) string {
	spans := find(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.from])
		b.WriteString(Mask)
		last = sp.to
	}
	b.WriteString(s[last:])
	return b.String()
}

// Passwords returns the passwords DSN would hide in s, each as written and,
// if it is percent-encoded, also decoded.
func Passwords(s string) []string {
	var out []string
	for _, sp := range find(s) {
		p := s[sp.from:sp.to]
		out = append(out, p)
		if d, err := url.PathUnescape(p); err == nil && d != p {
			out = append(out, d)
		}
		if d, err := url.QueryUnescape(p); err == nil && d != p {
			out = append(out, d)
		}
	}
	return out
}

// Error returns err with its message redacted: every occurrence of each
// dsn is replaced by DSN(dsn), and every remaining occurrence of one of
// their passwords (as written, percent-decoded or percent-encoded) by Mask.
// errors.Is and errors.As still see err and its chain (whose own messages
// are not redacted: print the returned error, not an unwrapped one). It
// returns err itself when there is nothing to hide, and nil for a nil err.
func Error(err error, dsns ...string) error {
	if err == nil {
		return nil
	}
	orig := err.Error()
	msg := orig
	for _, d := range dsns {
		if d != "" {
			msg = strings.ReplaceAll(msg, d, DSN(d))
		}
	}
	for _, d := range dsns {
		for _, p := range Passwords(d) {
			for _, v := range []string{p, url.QueryEscape(p), url.PathEscape(p)} {
				if v != "" && v != Mask {
					msg = strings.ReplaceAll(msg, v, Mask)
				}
			}
		}
	}
	msg = quotedPieces(msg, dsns)
	if msg == orig {
		return err
	}
	return &redacted{msg: msg, err: err}
}

// quotedPieces masks every quoted string ("…" or `…`) of msg that is a
// piece of a password: parsers quote the part they choke on (url.Parse:
// `invalid port ":w" after host` for the password "p@ss:w/rd", a query
// decoder: `invalid URL escape "%Z"`). A quoted DSN is redacted with DSN.
func quotedPieces(msg string, dsns []string) string {
	var pws []string
	for _, d := range dsns {
		pws = append(pws, Passwords(d)...)
	}
	if len(pws) == 0 {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		q := msg[i]
		if q != '"' && q != '`' {
			b.WriteByte(q)
			i++
			continue
		}
		end := i + 1
		for end < len(msg) && msg[end] != q {
			if q == '"' && msg[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(msg) {
			b.WriteString(msg[i:])
			break
		}
		lit := msg[i : end+1]
		piece := lit[1 : len(lit)-1]
		if u, err := strconv.Unquote(lit); err == nil {
			piece = u
		}
		switch {
		case piece != "" && slices.ContainsFunc(pws, func(p string) bool { return strings.Contains(p, piece) }):
			lit = string(q) + Mask + string(q)
		case strings.Contains(piece, "@"):
			// A DSN as another library printed it, perhaps redacted
			// its own way after misreading it: redact it again.
			if r := DSN(piece); r != piece {
				lit = string(q) + r + string(q)
			}
		}
		b.WriteString(lit)
		i = end + 1
	}
	return b.String()
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// find returns the password spans of s, sorted and not overlapping.
func find(s string) []span {
	spans := params(s)
	if sp, ok := userinfo(s); ok {
		spans = merge(spans, sp)
	}
	return spans
}

// userinfo finds the password of "[scheme://]user:PASS@rest".
func userinfo(s string) (span, bool) {
	start := 0
	// A "://" is a URL's only if its ':' is the string's first: in
	// "user:PA://SS@tcp(h)/db" an earlier ':' ends a MySQL DSN's user.
	if i := strings.Index(s, "://"); i >= 0 && strings.IndexByte(s, ':') == i {
		j := i
		for j > 0 && isSchemeChar(s[j-1]) {
			j--
		}
		if j < i && isLetter(s[j]) {
			start = i + 3
		}
	}
	at := strings.LastIndexByte(s[start:], '@')
	if at < 0 {
		return span{}, false
	}
	info := s[start : start+at]
	colon := strings.IndexByte(info, ':')
	if colon < 0 || strings.ContainsAny(info[:colon], " \t\r\n") {
		// No password, or white space in the "user": a key=value DSN whose
		// value holds an '@' (its password, if any, is a parameter).
		return span{}, false
	}
	from, to := start+colon+1, start+at
	if from == to {
		return span{}, false // "user:@host": empty password
	}
	return span{from, to}, true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isSchemeChar(c byte) bool {
	return isLetter(c) || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// passwordKeys are the parameter names whose values are hidden.
var passwordKeys = []string{"password", "passwd", "pwd"}

// params finds the values of password parameters.
func params(s string) []span {
	lower := strings.ToLower(s)
	var out []span
	for i := 0; i < len(s); i++ {
		// A parameter starts the string or follows white space, '?', '&' or ';'.
		if i > 0 && !strings.ContainsRune(" \t\r\n?&;", rune(s[i-1])) {
			continue
		}
		query := i > 0 && (s[i-1] == '?' || s[i-1] == '&')
		for _, k := range passwordKeys {
			if !strings.HasPrefix(lower[i:], k) {
				continue
			}
			j := i + len(k)
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') && !query {
				j++
			}
			if j >= len(s) || s[j] != '=' {
				continue
			}
			j++
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') && !query {
				j++
			}
			end := valueEnd(s, j, query)
			if end > j {
				out = append(out, span{j, end})
				i = end - 1
			}
			break
		}
	}
	return out
}

// valueEnd returns the end of the parameter value starting at j: a quoted
// key=value value ends after its closing quote (backslash escapes), an
// unquoted one at white space, a URL query value at '&' or '#'.
func valueEnd(s string, j int, query bool) int {
	if query {
		if k := strings.IndexAny(s[j:], "&# \t\r\n"); k >= 0 {
			return j + k
		}
		return len(s)
	}
	if j < len(s) && s[j] == '\'' {
		for k := j + 1; k < len(s); k++ {
			switch s[k] {
			case '\\':
				k++
			case '\'':
				return k + 1
			}
		}
		return len(s) // unterminated: hide the rest
	}
	if k := strings.IndexAny(s[j:], " \t\r\n"); k >= 0 {
		return j + k
	}
	return len(s)
}

// merge adds sp to the sorted spans, joining overlaps.
func merge(spans []span, sp span) []span {
	out := make([]span, 0, len(spans)+1)
	added := false
	for _, x := range spans {
		if !added && sp.from < x.from {
			out = appendJoined(out, sp)
			added = true
		}
		out = appendJoined(out, x)
	}
	if !added {
		out = appendJoined(out, sp)
	}
	return out
}

func appendJoined(out []span, sp span) []span {
	if n := len(out); n > 0 && sp.from <= out[n-1].to {
		out[n-1].to = max(out[n-1].to, sp.to)
		return out
	}
	return append(out, sp)
}
