package distlocktest_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/testkit"
)

// extraSlot: a semaphore of N permits that admits N+1 holders — the
// Locker, asked for permit 0 while it is held, grants a lock on a key
// outside the semaphore ("…/permit/extra") instead.
const extraSlot flaw = "semaphore-extra-slot"

// extraSlotLocker is a memLocker with flaw extraSlot.
type extraSlotLocker struct{ *memLocker }

func (l *extraSlotLocker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	lease, err := l.memLocker.TryAcquire(ctx, key, opts)
	if base, ok := strings.CutSuffix(key, "/permit/0"); ok && errors.Is(err, distlock.ErrNotAcquired) {
		return l.memLocker.TryAcquire(ctx, base+"/permit/extra", opts)
	}
	return lease, err
}

// runSemaphoreSuite runs distlocktest.Semaphore on the reference locker of
// locktest_test.go, with flaw f.
func runSemaphoreSuite(t *testing.T, f flaw) {
	s := &memService{locks: map[string]memLock{}, queued: map[string]int{}}
	var opts distlocktest.Options
	if f == unfencedStore {
		opts.Store = func(t *testing.T) distlocktest.Store {
			return ignoresTokens{distlocktest.PostgresStore(t, testkit.Postgres(t))}
		}
	}
	distlocktest.Semaphore(t, func(t *testing.T) distlock.Locker {
		l := &memLocker{s: s, flaw: f}
		if f == extraSlot {
			return &extraSlotLocker{l}
		}
		return l
	}, opts)
}

func TestSemaphoreSuiteOnReferenceLocker(t *testing.T) { runSemaphoreSuite(t, correct) }

// semFlawEnv names the flaw TestSemaphoreSuiteOnFlawedLocker runs the
// suite with, in the child process started by
// TestSemaphoreSuiteCatchesFlaws.
const semFlawEnv = "SEMAPHORETEST_FLAW"

// TestSemaphoreSuiteOnFlawedLocker is the child process of
// TestSemaphoreSuiteCatchesFlaws: it runs the semaphore suite on a flawed
// locker and is expected to fail. Without the variable it does nothing.
func TestSemaphoreSuiteOnFlawedLocker(t *testing.T) {
	f := flaw(os.Getenv(semFlawEnv))
	if f == correct {
		t.Log("runs only as the child process of TestSemaphoreSuiteCatchesFlaws")
		return
	}
	runSemaphoreSuite(t, f)
}

// TestSemaphoreSuiteCatchesFlaws runs the semaphore suite, in a child
// process (a failing suite fails its *testing.T), on lockers with one
// deliberate defect each, and asserts that the named suite test reports
// it with the expected message: a check that passes a broken semaphore
// proves nothing.
func TestSemaphoreSuiteCatchesFlaws(t *testing.T) {
	for _, tc := range []struct {
		flaw    flaw
		test    string // suite test that must fail
		message string // regexp its failure output must match
	}{
		{extraSlot, "Exclusion", `4 holders at once, more than the 3 permits`},
		{flatTokens, "Tokens", `round 1: permit ".*/permit/\d": token 1, its previous holder's 1`},
		{longValidity, "HolderExpiry", `when the successor's Acquire returned: the previous holder's lease is still Valid`},
		{unfencedStore, "Fenced/fenced", `the paused holder's late write \(token \d+\) after its successor's \(token \d+\) = <nil>, want fenced.ErrStaleToken`},
	} {
		t.Run(string(tc.flaw)+"/"+tc.test, func(t *testing.T) {
			t.Parallel()
			catchFlaw(t, "TestSemaphoreSuiteOnFlawedLocker", semFlawEnv, tc.flaw, tc.test, tc.message)
		})
	}
}
