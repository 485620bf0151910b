package distlocktest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/pglock"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/testkit"
)

// The overlap check is itself tested: run on multilock it passes, run on
// a multi-lock with a deliberate flaw it must fail, with the message that
// names the flaw. The Lockers are pglock's on the test PostgreSQL.

// multiFlaw is a deliberate defect of a multi-lock.
type multiFlaw string

const (
	// callerOrder takes the keys in the order the caller gave them (with
	// rollback on failure): two callers with {a, b} and {b, a} can each
	// hold one key and wait for the other's.
	callerOrder multiFlaw = "caller-order"
	// probeLast only checks that the greatest key is free (acquires and
	// releases it at once) and reports it held: its holder does not
	// exclude others from it.
	probeLast multiFlaw = "probe-last-key"
)

// flawedSet is the set of a flawed multi-lock.
type flawedSet struct {
	keys   []string                  // as reported: sorted, no duplicates
	leases map[string]distlock.Lease // per reported key
	held   []distlock.Lease          // what is really held, in acquisition order
}

func (s *flawedSet) Keys() []string                { return slices.Clone(s.keys) }
func (s *flawedSet) Token(key string) fenced.Token { return s.leases[key].Token() }

func (s *flawedSet) Extend(ctx context.Context, ttl time.Duration) error {
	var errs []error
	for _, l := range s.held {
		errs = append(errs, l.Extend(ctx, ttl))
	}
	return errors.Join(errs...)
}

func (s *flawedSet) Release(ctx context.Context) error {
	var errs []error
	for _, l := range slices.Backward(s.held) {
		errs = append(errs, l.Release(ctx))
	}
	return errors.Join(errs...)
}

func flawedAcquire(f multiFlaw) acquireSet {
	return func(ctx context.Context, l distlock.Locker, keys []string, opts *distlock.Options) (heldSet, error) {
		s := &flawedSet{keys: slices.Compact(slices.Sorted(slices.Values(keys))), leases: map[string]distlock.Lease{}}
		order := s.keys
		if f == callerOrder {
			order = nil
			for _, k := range keys {
				if !slices.Contains(order, k) {
					order = append(order, k)
				}
			}
		}
		for i, k := range order {
			lease, err := l.Acquire(ctx, k, opts)
			if err != nil {
				_ = s.Release(context.WithoutCancel(ctx))
				return nil, err
			}
			s.leases[k] = lease
			if f == probeLast && i == len(order)-1 {
				// "It was free": the key is let go at once.
				if err := lease.Release(ctx); err != nil {
					_ = s.Release(context.WithoutCancel(ctx))
					return nil, err
				}
				continue
			}
			s.held = append(s.held, lease)
		}
		return s, nil
	}
}

// pgLockers returns a factory of pglock Lockers on the test PostgreSQL,
// each with a pool of its own.
func pgLockers(t *testing.T) NewLocker {
	url := testkit.PostgresServerURL(t)
	return func(t *testing.T) distlock.Locker {
		l, err := pglock.New(testkit.PostgresPoolFor(t, url), nil)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// TestOverlapOnMultiLock: the overlap check passes on multilock (the
// control: the failures below come from the flaws, not the check).
func TestOverlapOnMultiLock(t *testing.T) {
	overlap(t, pgLockers(t), Options{}, time.Second, multilockAcquire)
}

// multiFlawEnv names the flaw TestOverlapOnFlawedMultiLock runs the
// overlap check with, in the child process started by
// TestOverlapCatchesFlawedMultiLocks.
const multiFlawEnv = "MULTILOCKTEST_FLAW"

// TestOverlapOnFlawedMultiLock is the child process of
// TestOverlapCatchesFlawedMultiLocks: it runs the overlap check on a
// flawed multi-lock and is expected to fail. Run directly, it does nothing.
func TestOverlapOnFlawedMultiLock(t *testing.T) {
	f := multiFlaw(os.Getenv(multiFlawEnv))
	if f == "" {
		t.Log("runs only as the child process of TestOverlapCatchesFlawedMultiLocks")
		return
	}
	// Long enough for the flaw to show (a deadlock forms within a second
	// or two); the watchdog, after WaitTimeout without progress, ends it.
	overlap(t, pgLockers(t), Options{WaitTimeout: 3 * time.Second}, 30*time.Second, flawedAcquire(f))
}

// TestOverlapCatchesFlawedMultiLocks runs the overlap check, in a child
// process (a failing check fails its *testing.T), on multi-locks with one
// deliberate flaw each and asserts it fails with the expected message.
func TestOverlapCatchesFlawedMultiLocks(t *testing.T) {
	for _, tc := range []struct {
		flaw    multiFlaw
		message string // regexp the failure output must match
	}{
		{callerOrder, `no set acquired for 3s \(\d+ acquired so far\): deadlock\? goroutines:`},
		// The probed key is caught in a second holder's set while the
		// first holds it, or with a token below one already seen.
		{probeLast, `clients \d and \d hold key ".*" at once: their sets overlap|not above the previous holder's`},
	} {
		t.Run(string(tc.flaw), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0],
				"-test.run=^TestOverlapOnFlawedMultiLock$", "-test.count=1", "-test.v", "-test.timeout=90s")
			cmd.Env = append(os.Environ(), multiFlawEnv+"="+string(tc.flaw))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the overlap check on a multi-lock with flaw %q did not fail (err %v):\n%s", tc.flaw, err, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestOverlapOnFlawedMultiLock ") {
				t.Fatalf("the overlap check did not fail on flaw %q:\n%s", tc.flaw, out)
			}
			if !regexp.MustCompile(tc.message).Match(out) {
				t.Fatalf("the overlap check failed on flaw %q without a message matching %q:\n%s", tc.flaw, tc.message, out)
			}
			t.Logf("caught: %s", firstMatch(tc.message, out))
		})
	}
}

// firstMatch returns the line of out that matches pattern.
func firstMatch(pattern string, out []byte) string {
	re := regexp.MustCompile(pattern)
	for line := range strings.Lines(string(out)) {
		if re.MatchString(line) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
