package testkit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/internal/redact"
)

// StartCommand is the command printed when a server cannot be reached.
const StartCommand = `scripts/services.sh up && eval "$(scripts/services.sh env)"`

// dialTimeout bounds the probe of a default endpoint: loopback answers in
// microseconds, a closed port refuses at once.
const dialTimeout = 500 * time.Millisecond

// server describes how one kind of server is found. Its resolved endpoint is
// cached for the process: every test still gets its own namespace on it.
type server struct {
	name   string // human name, e.g. "PostgreSQL"
	envVar string
	def    string                           // scripts/services.sh default
	addrs  func(v string) ([]string, error) // host:port list to dial for value v
	// container starts a testcontainers-go container and returns the value
	// (same format as the env variable); nil when there is no module for it.
	container func(ctx context.Context) (string, error)

	once  sync.Once
	value string
	err   error
}

// get returns the endpoint value, or skips/fails the test when there is none.
func (s *server) get(t testing.TB) string {
	t.Helper()
	s.once.Do(s.resolve)
	if s.err != nil {
		unavailable(t, s.err)
	}
	return s.value
}

// resolve finds the endpoint. Its errors show endpoint values with their
// passwords hidden (redact): they end up in test logs.
func (s *server) resolve() {
	if v := os.Getenv(s.envVar); v != "" {
		if err := s.reachable(v); err != nil {
			s.err = fmt.Errorf("%s unreachable at %s=%s: %w", s.name, s.envVar, redact.DSN(v), redact.Error(err, v))
			return
		}
		s.value = v
		return
	}
	errDef := s.reachable(s.def)
	if errDef == nil {
		s.value = s.def
		return
	}
	s.err = fmt.Errorf("%s unreachable at the default %s (%s unset): %w", s.name, redact.DSN(s.def), s.envVar, redact.Error(errDef, s.def))
	if s.container == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := dockerHealthy(ctx); err != nil {
		s.err = fmt.Errorf("%w; no Docker for testcontainers: %v", s.err, err)
		return
	}
	v, err := s.container(ctx)
	if err != nil {
		s.err = fmt.Errorf("%w; testcontainers: %v", s.err, err)
		return
	}
	s.value, s.err = v, nil
}

func (s *server) reachable(v string) error {
	addrs, err := s.addrs(v)
	if err != nil {
		return err
	}
	return dialAll(addrs)
}

// dialAll checks that every address accepts a TCP connection.
func dialAll(addrs []string) error {
	if len(addrs) == 0 {
		return errors.New("no address")
	}
	var errs []error
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, dialTimeout)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_ = c.Close()
	}
	return errors.Join(errs...)
}

// CI reports whether the tests run under CI (CI=true or 1): there an
// unreachable server fails the test instead of skipping it.
func CI() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "true", "1", "yes":
		return true
	}
	return false
}

// Unsupported skips the test when the server in use lacks what it needs
// (an older version, a setting outside the test's range), and fails it
// under CI, where the project's own servers, which have it, are used: a
// CI run never passes by skipping.
func Unsupported(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "testkit: the server cannot run this test: " + fmt.Sprintf(format, args...)
	if CI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// unavailable skips the test (fails it under CI) naming the start command.
func unavailable(t testing.TB, err error) {
	t.Helper()
	msg := fmt.Sprintf("testenv: %v\n\tstart the servers with: %s", err, StartCommand)
	if CI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// hostPorts turns "host:port" or "scheme://host:port" items into host:port.
func hostPorts(v string) ([]string, error) {
	var out []string
	for _, s := range splitList(v) {
		if strings.Contains(s, "://") {
			u, err := url.Parse(s)
			if err != nil {
				return nil, err
			}
			s = u.Host
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Name returns prefix followed by 16 random lowercase base32 characters,
// e.g. Name("ck_") = "ck_q2w3e4r5t6y7u8i9". It is a valid identifier in
// PostgreSQL, MySQL, DynamoDB and ZooKeeper.
func Name(prefix string) string {
	return prefix + strings.ToLower(rand.Text()[:16])
}

// cleanupContext is the context for removing a namespace: the test's own
// context is already cancelled when cleanups run.
func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// setupContext bounds the creation of a namespace.
func setupContext(t testing.TB) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), 30*time.Second)
}
