package testkit

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
)

// recorder stands in for a test to see whether a helper skips or fails it.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped, r.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.failed, r.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}

// run calls fn with a recorder in its own goroutine (Skip/Fatal end it).
func run(t *testing.T, fn func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	_ = l.Close()
	return a
}

func TestUnreachableServer(t *testing.T) {
	dead := closedPort(t)
	for _, tc := range []struct {
		ci       string
		wantSkip bool
	}{{"", true}, {"false", true}, {"true", false}, {"1", false}} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv("CONCURKIT_TEST_DUMMY", dead)
			s := &server{name: "Dummy", envVar: "CONCURKIT_TEST_DUMMY", def: dead, addrs: hostPorts}
			r := run(t, func(tb testing.TB) { s.get(tb) })
			if r.skipped != tc.wantSkip || r.failed == tc.wantSkip {
				t.Fatalf("skipped=%v failed=%v, want skip=%v", r.skipped, r.failed, tc.wantSkip)
			}
			for _, want := range []string{"scripts/services.sh up", "CONCURKIT_TEST_DUMMY", dead} {
				if !strings.Contains(r.msg, want) {
					t.Fatalf("message %q lacks %q", r.msg, want)
				}
			}
		})
	}
}

func TestEnvOverridesDefault(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("CONCURKIT_TEST_DUMMY", "http://"+l.Addr().String())
	s := &server{name: "Dummy", envVar: "CONCURKIT_TEST_DUMMY", def: closedPort(t), addrs: hostPorts}
	if got := s.get(t); got != "http://"+l.Addr().String() {
		t.Fatalf("get = %q, want the env value", got)
	}
}

func TestDefaultUsedWhenEnvUnset(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("CONCURKIT_TEST_DUMMY", "")
	s := &server{name: "Dummy", envVar: "CONCURKIT_TEST_DUMMY", def: l.Addr().String(), addrs: hostPorts}
	if got := s.get(t); got != l.Addr().String() {
		t.Fatalf("get = %q, want the default", got)
	}
}

// Without a Docker engine the testcontainers step must give up at once and
// leave the skip message intact.
func TestContainerFallbackWithoutDocker(t *testing.T) {
	if err := dockerHealthy(context.Background()); err == nil {
		t.Skip("a Docker engine answers here")
	}
	t.Setenv("CI", "")
	t.Setenv("CONCURKIT_TEST_DUMMY", "")
	called := false
	s := &server{name: "Dummy", envVar: "CONCURKIT_TEST_DUMMY", def: closedPort(t), addrs: hostPorts,
		container: func(context.Context) (string, error) { called = true; return "", nil }}
	r := run(t, func(tb testing.TB) { s.get(tb) })
	if !r.skipped || called || !strings.Contains(r.msg, "Docker") {
		t.Fatalf("skipped=%v container called=%v msg=%q", r.skipped, called, r.msg)
	}
}

// TestUnreachableServerHidesPassword: the skip/fail message names the
// environment value it could not use, with the password hidden, whether
// the value cannot be parsed or its server does not answer.
func TestUnreachableServerHidesPassword(t *testing.T) {
	dead := closedPort(t)
	for _, tc := range []struct {
		name  string
		addrs func(string) ([]string, error)
		value string
	}{
		{"postgres", postgresServer.addrs, "postgres://alice:s3cretpw@" + dead + "/db"},
		{"postgres unparsable", postgresServer.addrs, "postgres://alice:p@ss:w/rd@" + dead + "/db"},
		{"postgres key=value", postgresServer.addrs, "host=127.0.0.1 port=1 user=alice password=s3cretpw"},
		{"mysql", mysqlServer.addrs, "alice:s3cretpw@tcp(" + dead + ")/"},
		{"mysql unparsable", mysqlServer.addrs, "alice:p@ss:w/rd@tcp(" + dead + "/"},
		{"url", hostPorts, "http://alice:s3cretpw@" + dead},
		{"url unparsable", hostPorts, "http://alice:p@ss:w/rd@" + dead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", "")
			t.Setenv("CONCURKIT_TEST_DUMMY", tc.value)
			s := &server{name: "Dummy", envVar: "CONCURKIT_TEST_DUMMY", def: dead, addrs: tc.addrs}
			r := run(t, func(tb testing.TB) { s.get(tb) })
			if !r.skipped {
				t.Fatalf("not skipped: %q", r.msg)
			}
			for _, secret := range []string{"s3cretpw", "ss:w", `":w"`, "@ss"} {
				if strings.Contains(r.msg, secret) {
					t.Fatalf("message shows the password (%q): %s", secret, r.msg)
				}
			}
			if !strings.Contains(r.msg, "CONCURKIT_TEST_DUMMY") {
				t.Fatalf("message %q does not name the variable", r.msg)
			}
		})
	}
}
