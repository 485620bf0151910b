package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// TestMigrateCLIHidesPassword: `concurkit migrate up|down` never prints
// the password of the --dsn it was given, whether the DSN cannot be parsed
// or its server refuses the connection.
func TestMigrateCLIHidesPassword(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	for _, tc := range []struct{ dialect, dsn string }{
		{"postgres", "postgres://alice:p@ss:w/rd@" + closed + "/app"},
		{"postgres", "postgres://alice:s3cretpw@" + closed + "/app?sslmode=disable"},
		{"postgres", "postgres://alice:s3cretpw@127.0.0.1:notaport/app"},
		{"mysql", "alice:p@ss:w/rd@tcp(" + closed + ")/app"},
	} {
		for _, dir := range []string{"up", "down"} {
			var out, errOut bytes.Buffer
			err := run(t.Context(), []string{"migrate", dir, "--dialect", tc.dialect, "--dsn", tc.dsn}, &out, &errOut)
			if err == nil {
				t.Fatalf("migrate %s %s: no error", dir, tc.dsn)
			}
			all := err.Error() + out.String() + errOut.String()
			for _, secret := range []string{"s3cretpw", "ss:w", `":w"`} {
				if strings.Contains(all, secret) {
					t.Fatalf("migrate %s shows the password (%q): %s", dir, secret, all)
				}
			}
		}
	}
}
