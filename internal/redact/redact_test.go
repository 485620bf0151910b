package redact_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"testing"

	"github.com/concurkit/concurkit/internal/redact"
)

func TestDSN(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// PostgreSQL URLs.
		{"postgres://alice:s3cret@db.example:5432/app?sslmode=disable", "postgres://alice:xxxxx@db.example:5432/app?sslmode=disable"},
		{"postgresql://alice@db/app", "postgresql://alice@db/app"},
		{"postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable"},
		{"postgres://db/app?user=alice&password=s3cret&sslmode=require", "postgres://db/app?user=alice&password=xxxxx&sslmode=require"},
		{"postgres://db/app?PASSWORD=s3cret", "postgres://db/app?PASSWORD=xxxxx"},
		{"pgx5://alice:s3cret@db/app", "pgx5://alice:xxxxx@db/app"},
		// Passwords with @ : / % (raw or percent-encoded).
		{"postgres://alice:p@ss:w/rd%@db:5432/app", "postgres://alice:xxxxx@db:5432/app"},
		{"postgres://alice:p%40ss%3Aw%2Frd%25@db:5432/app", "postgres://alice:xxxxx@db:5432/app"},
		{"postgres://alice:@db/app", "postgres://alice:@db/app"},
		// key=value DSNs.
		{"host=db user=alice password=s3cret dbname=app", "host=db user=alice password=xxxxx dbname=app"},
		{"host=db password = 's3 c\\'ret' dbname=app", "host=db password = xxxxx dbname=app"},
		{"password=p@ss:w/rd host=db", "password=xxxxx host=db"},
		{"host=db user=a@b dbname=app", "host=db user=a@b dbname=app"},
		{"host=db dbname=app", "host=db dbname=app"},
		// MySQL DSNs.
		{"root@tcp(127.0.0.1:13306)/", "root@tcp(127.0.0.1:13306)/"},
		{"alice:s3cret@tcp(db:3306)/app?parseTime=true", "alice:xxxxx@tcp(db:3306)/app?parseTime=true"},
		{"alice:p@ss:w/rd@tcp(db:3306)/app", "alice:xxxxx@tcp(db:3306)/app"},
		{"mysql://alice:s3cret@tcp(db:3306)/app", "mysql://alice:xxxxx@tcp(db:3306)/app"},
		{"alice:s3cret@/app", "alice:xxxxx@/app"},
		// Other URLs.
		{"redis://:s3cret@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"http://127.0.0.1:18000", "http://127.0.0.1:18000"},
		{"127.0.0.1:16379", "127.0.0.1:16379"},
		{"", ""},
		// Inside a message.
		{`connect "postgres://alice:s3cret@db/app": refused`, `connect "postgres://alice:xxxxx@db/app": refused`},
	} {
		if got := redact.DSN(tc.in); got != tc.want {
			t.Errorf("DSN(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// Whatever the DSN, the password must not survive in any form.
func TestDSNHidesPassword(t *testing.T) {
	for _, pw := range []string{"s3cret", "p@ss", "p:ss", "p/ss", "p%ss", "p@:/%ss", "@@@", "a b", "x?y#z"} {
		enc := url.UserPassword("alice", pw).String()
		for _, dsn := range []string{
			"postgres://alice:" + pw + "@db:5432/app",
			"postgres://" + enc + "@db:5432/app",
			"postgres://db/app?password=" + url.QueryEscape(pw),
			"alice:" + pw + "@tcp(db:3306)/app",
			"host=db password='" + strings.ReplaceAll(pw, "'", `\'`) + "' user=alice",
		} {
			got := redact.DSN(dsn)
			for _, p := range redact.Passwords(dsn) {
				if strings.Contains(got, p) {
					t.Errorf("DSN(%q) = %q still holds %q", dsn, got, p)
				}
			}
			if strings.Contains(got, pw) || !strings.Contains(got, redact.Mask) {
				t.Errorf("DSN(%q) = %q", dsn, got)
			}
		}
	}
}

func TestError(t *testing.T) {
	dsn := "postgres://alice:p@ss:w/rd%Zz@db:5432/app"
	_, perr := url.Parse(dsn)
	if perr == nil {
		t.Fatal("url.Parse accepted the raw password")
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"whole dsn", fmt.Errorf("connect %s: %w", dsn, fs.ErrNotExist)},
		{"url.Parse", fmt.Errorf("x: %w", perr)},
		{"password alone", fmt.Errorf("bad password p@ss:w/rd%%Zz: %w", fs.ErrNotExist)},
		{"quoted DSN", fmt.Errorf("cannot parse `postgres://alice:xxxxx@ss:xxxxxx@db:5432/app`: %w", fs.ErrNotExist)},
		{"quoted piece", fmt.Errorf("invalid URL escape %q: %w", "%Zz", fs.ErrNotExist)},
		{"percent-encoded", fmt.Errorf("connect postgres://alice:%s@db: %w", url.QueryEscape("p@ss:w/rd%Zz"), fs.ErrNotExist)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := redact.Error(tc.err, dsn)
			if m := got.Error(); strings.Contains(m, "ss:w") || strings.Contains(m, `":w"`) || strings.Contains(m, "%3Aw") || strings.Contains(m, "%Zz") || strings.Contains(m, "@ss") {
				t.Fatalf("Error() = %q", got)
			}
			if !errors.Is(got, tc.err) {
				t.Fatal("the redacted error does not unwrap to the original")
			}
		})
	}
	plain := errors.New("no secret here")
	if redact.Error(plain, dsn) != plain || redact.Error(nil, dsn) != nil {
		t.Fatal("an error without secrets must come back as is")
	}
}

func FuzzDSN(f *testing.F) {
	f.Add("alice", "s3cret", "db:5432")
	f.Add("a", "p@:/%", "h")
	f.Fuzz(func(t *testing.T, user, pw, host string) {
		if pw == "" || strings.ContainsAny(user, ":@ \t\r\n") || strings.Contains(host, "@") || strings.Contains(redact.Mask, pw) {
			return
		}
		// "u://x@tcp(h)/db" is also the URL of user x without a password
		// (the ambiguity DSN's documentation states): not a MySQL DSN's.
		ambiguous := strings.HasPrefix(pw, "//") && user != "" && ('a' <= user[0]|0x20 && user[0]|0x20 <= 'z') &&
			strings.Trim(user, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.") == ""
		for i, dsn := range []string{"postgres://" + user + ":" + pw + "@" + host + "/db", user + ":" + pw + "@tcp(" + host + ")/db"} {
			if i == 1 && ambiguous {
				continue
			}
			if got := redact.DSN(dsn); strings.Contains(got, ":"+pw+"@") {
				t.Fatalf("DSN(%q) = %q", dsn, got)
			}
		}
	})
}
