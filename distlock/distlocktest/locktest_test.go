package distlocktest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/distlock/internal/lease"
	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/observe"
	"github.com/concurkit/concurkit/testkit"
)

// memService is an in-process lock service with TTL expiry, a reference
// implementation of the contract used to check the suite itself (the
// backends run the suite against real servers).
type memService struct {
	mu    sync.Mutex
	next  fenced.Token
	locks map[string]memLock
	// queued are requests that reached the service after their caller
	// gave up (flaw lateTake): each takes its key when it is next freed.
	queued map[string]int
	// busy counts attempts on a held lock (flaw overlap).
	busy int
}

// free deletes key's lock; a queued request then takes it, for nobody.
// s.mu is held.
func (s *memService) free(key string) {
	delete(s.locks, key)
	if s.queued[key] > 0 {
		s.queued[key]--
		s.next++
		s.locks[key] = memLock{token: s.next, expires: time.Now().Add(time.Hour)}
	}
}

type memLock struct {
	token   fenced.Token
	expires time.Time
}

// flaw is a deliberate defect of memLocker, to check that the suite
// catches it.
type flaw string

const (
	correct flaw = ""
	// longValidity: the lease reports a validity of 2×TTL while the
	// service frees the lock at TTL.
	longValidity flaw = "validity-2xTTL"
	// releaseAny: Release deletes the key whoever holds it (a plain DEL
	// instead of compare-and-delete).
	releaseAny flaw = "release-deletes-successor"
	// flatTokens: every acquisition gets the same token.
	flatTokens flaw = "tokens-not-increasing"
	// unfencedStore: the locker is right but the store's fenced write
	// ignores the token (a guard that is not there).
	unfencedStore flaw = "store-ignores-tokens"
	// silent: the locker reports nothing to observe.Hooks.
	silent flaw = "no-hooks"
	// overlap: TryAcquire ignores a held lock on every 4th attempt the
	// service sees on a held lock (two holders).
	overlap flaw = "no-exclusion"
	// lateTake: an Acquire cancelled while it waits leaves a request
	// behind that takes the lock once it is free, for nobody, and nothing
	// undoes it (a request the server applied after its caller gave up).
	lateTake flaw = "late-take-not-undone"
	// closeKeeps: Close does not release the leases still held.
	closeKeeps flaw = "close-keeps-leases"
)

// ignoresTokens is a Store whose fenced write is a plain write.
type ignoresTokens struct{ distlocktest.Store }

func (s ignoresTokens) Write(ctx context.Context, _ fenced.Token, value string) error {
	return s.WriteUnfenced(ctx, value)
}

type memLocker struct {
	s    *memService
	flaw flaw
	bg   lease.Group
}

// Close implements distlock.Closer.
func (l *memLocker) Close(ctx context.Context) error {
	return l.bg.Close(ctx, "memlock")
}

func (l *memLocker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	if _, err := lease.Resolve("memlock", key, opts); err != nil {
		return nil, err
	}
	if l.bg.Closed() {
		return nil, lease.ErrClosed("memlock")
	}
	if l.flaw == lateTake {
		defer func() {
			if ctx.Err() != nil { // the request in flight reached the service
				l.s.mu.Lock()
				l.s.queued[key]++
				l.s.mu.Unlock()
			}
		}()
	}
	if l.flaw == silent { // a plain loop: no LockWait
		for {
			ls, err := l.TryAcquire(ctx, key, opts)
			if !errors.Is(err, distlock.ErrNotAcquired) {
				return ls, err
			}
			select {
			case <-ctx.Done():
				return nil, errors.Join(distlock.ErrNotAcquired, ctx.Err())
			case <-time.After(time.Millisecond):
			}
		}
	}
	return lease.Poll(ctx, lease.PollPolicy{Package: "memlock", Key: key, Stop: l.bg.Done()}, func(ctx context.Context) (distlock.Lease, error) {
		return l.TryAcquire(ctx, key, opts)
	})
}

func (l *memLocker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	o, err := lease.Resolve("memlock", key, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if l.bg.Closed() {
		return nil, lease.ErrClosed("memlock")
	}
	s := l.s
	start := time.Now()
	s.mu.Lock()
	if cur, ok := s.locks[key]; ok && time.Now().Before(cur.expires) && (l.flaw != overlap || s.refuse()) {
		s.mu.Unlock()
		return nil, distlock.ErrNotAcquired
	}
	s.next++
	tok := s.next
	if l.flaw == flatTokens {
		tok = 1
	}
	s.locks[key] = memLock{token: tok, expires: start.Add(o.TTL)}
	s.mu.Unlock()
	validity := o.TTL
	if l.flaw == longValidity {
		validity *= 2
	}
	hooks := observe.FromContext(ctx)
	if l.flaw == silent {
		hooks = nil
	}
	group := &l.bg
	if l.flaw == closeKeeps {
		group = nil // Close does not know the leases
	}
	return lease.New(lease.Config{
		Package: "memlock", Hooks: hooks, Group: group,
		Key: key, Token: tok, TTL: validity, Start: start, AutoExtend: o.AutoExtend,
		Backend: lease.Backend{
			Extend: func(_ context.Context, ttl time.Duration) error {
				s.mu.Lock()
				defer s.mu.Unlock()
				cur, ok := s.locks[key]
				if !ok || cur.token != tok || !time.Now().Before(cur.expires) {
					return distlock.ErrLeaseLost
				}
				s.locks[key] = memLock{token: tok, expires: time.Now().Add(ttl)}
				return nil
			},
			Release: func(context.Context) error {
				s.mu.Lock()
				defer s.mu.Unlock()
				if cur, ok := s.locks[key]; ok && (cur.token == tok || l.flaw == releaseAny) {
					s.free(key)
					return nil
				}
				return distlock.ErrLeaseLost
			},
		},
	})
}

// refuse reports whether an attempt on a held lock is refused, as it should
// be, or (every 4th such attempt, for flaw overlap) granted. s.mu is held.
func (s *memService) refuse() bool {
	s.busy++
	return s.busy%4 != 0
}

func runSuite(t *testing.T, f flaw) {
	s := &memService{locks: map[string]memLock{}, queued: map[string]int{}}
	// The suite's default ShortTTL (1 s), as every backend gets: with 300 ms
	// an auto-extended lease was lost once on a loaded CI machine, its
	// extender descheduled past the lease's local validity (the lease ends
	// then, as it must).
	var opts distlocktest.Options
	if f == unfencedStore {
		opts.Store = func(t *testing.T) distlocktest.Store {
			return ignoresTokens{distlocktest.PostgresStore(t, testkit.Postgres(t))}
		}
	}
	newLocker := func(t *testing.T) distlock.Locker { return &memLocker{s: s, flaw: f} }
	distlocktest.Run(t, newLocker, opts)
	t.Run("Election", func(t *testing.T) { distlocktest.Election(t, newLocker, opts) })
}

func TestSuiteOnReferenceLocker(t *testing.T) { runSuite(t, correct) }

// flawEnv names the flaw TestSuiteOnFlawedLocker runs the suite with, in
// the child process started by TestSuiteCatchesFlawedLockers.
const flawEnv = "LOCKTEST_FLAW"

// TestSuiteOnFlawedLocker is the child process of
// TestSuiteCatchesFlawedLockers: it runs the suite on a flawed locker and
// is expected to fail.
func TestSuiteOnFlawedLocker(t *testing.T) {
	f := flaw(os.Getenv(flawEnv))
	if f == correct {
		t.Skip("runs only as the child process of TestSuiteCatchesFlawedLockers")
	}
	runSuite(t, f)
}

// TestSuiteCatchesFlawedLockers runs the whole suite, in a child process
// (a failing suite fails its *testing.T), on lockers with one deliberate
// defect each, and asserts that the named suite test catches it with the
// expected message: a suite that passes a broken locker proves nothing.
func TestSuiteCatchesFlawedLockers(t *testing.T) {
	for _, tc := range []struct {
		flaw    flaw
		test    string // suite test that must fail
		message string // regexp its failure output must match
	}{
		{longValidity, "HandoverAfterLocalExpiry", `previous holder's lease is still Valid .* outlives its lock on the server`},
		{longValidity, "Extend", `Deadline\(\) is .* beyond its TTL`},
		{longValidity, "Kleppmann", `round 1: when B's Acquire returned: the previous holder's lease is still Valid`},
		{releaseAny, "ReleaseExpiredKeepsSuccessor", `the successor's lock was deleted`},
		{flatTokens, "TokensIncrease", `acquisition 1: token 1, previous 1`},
		{flatTokens, "MutualExclusion", `not above the previous holder's`},
		{unfencedStore, "Kleppmann/fenced", `a stale holder's write landed after a newer holder's`},
		{silent, "Hooks", `LockWait events \[\]: want one`},
		// The second holder either walks into the critical section while
		// the first is inside, or takes the lock from under it just
		// after: the first's Release then finds its lock gone.
		{overlap, "MutualExclusion", `two holders inside the critical section|Release: distlock: lease lost`},
		{lateTake, "CancelWhileWaiting", `the waiter left state behind`},
		{closeKeeps, "Close", `Close returned but the lease it released still has a live context`},
		// The election suite: a term is a token, and a leader a holder.
		{flatTokens, "Election/OneLeader", `terms must strictly increase`},
		{overlap, "Election/OneLeader", `elected while 1 others lead|Resign: distlock: lease lost`},
		{longValidity, "Election/Deposed", `when the successor was elected: the previous holder's lease is still Valid`},
	} {
		t.Run(string(tc.flaw)+"/"+tc.test, func(t *testing.T) {
			t.Parallel()
			catchFlaw(t, "TestSuiteOnFlawedLocker", flawEnv, tc.flaw, tc.test, tc.message)
		})
	}
}

// catchFlaw runs the test child (a Test function of this package that runs
// a suite on a flawed locker) in a child process with env set to f — a
// failing suite fails its *testing.T, so it cannot run in this one — and
// fails t unless the child's subtest test (empty: child itself) failed
// with output matching the regexp message. It returns the child's output.
func catchFlaw(t *testing.T, child, env string, f flaw, test, message string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	run, name := "^"+child+"$", child
	if test != "" {
		run += "/^" + strings.ReplaceAll(test, "/", "$/^") + "$"
		name += "/" + test
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.count=1", "-test.v", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), env+"="+string(f))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("%s on a locker with flaw %q did not fail (err %v):\n%s", child, f, err, out)
	}
	if !strings.Contains(string(out), "--- FAIL: "+name+" ") {
		t.Fatalf("%s did not fail on flaw %q:\n%s", name, f, out)
	}
	if !regexp.MustCompile(message).Match(out) {
		t.Fatalf("%s failed on flaw %q without a message matching %q:\n%s", name, f, message, out)
	}
	return out
}
