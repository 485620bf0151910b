package distlocktest_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concurkit/concurkit/distlock"
	"github.com/concurkit/concurkit/distlock/distlocktest"
	"github.com/concurkit/concurkit/testkit"
)

const (
	// rwOpenGate: the gate of a read-write lock excludes nobody — the
	// Locker grants every request for a "…/gate" key on a key of its own.
	// Readers and writers still exclude each other through the slots, but
	// readers walk past a writer that waits for the readers inside.
	rwOpenGate flaw = "rwlock-open-gate"
	// rwOneSlot: every reader slot is the same lock — the Locker maps
	// "…/read/i" to "…/read/0" — so readers exclude each other.
	rwOneSlot flaw = "rwlock-one-slot"
)

// rwFlawLocker is a memLocker with flaw rwOpenGate or rwOneSlot.
type rwFlawLocker struct {
	*memLocker
	n atomic.Int64
}

func (l *rwFlawLocker) key(key string) string {
	switch l.flaw {
	case rwOpenGate:
		if strings.HasSuffix(key, "/gate") {
			return fmt.Sprintf("%s/%d", key, l.n.Add(1))
		}
	case rwOneSlot:
		if i := strings.LastIndex(key, "/read/"); i >= 0 {
			return key[:i] + "/read/0"
		}
	}
	return key
}

func (l *rwFlawLocker) Acquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.memLocker.Acquire(ctx, l.key(key), opts)
}

func (l *rwFlawLocker) TryAcquire(ctx context.Context, key string, opts *distlock.Options) (distlock.Lease, error) {
	return l.memLocker.TryAcquire(ctx, l.key(key), opts)
}

// runRWLockSuite runs distlocktest.RWLock on the reference locker of
// locktest_test.go, with flaw f.
func runRWLockSuite(t *testing.T, f flaw) {
	s := &memService{locks: map[string]memLock{}, queued: map[string]int{}}
	var opts distlocktest.Options
	switch f {
	case unfencedStore:
		opts.Store = func(t *testing.T) distlocktest.Store {
			return ignoresTokens{distlocktest.PostgresStore(t, testkit.Postgres(t))}
		}
	case rwOneSlot, lateTake:
		// They fail by a wait that never ends: the guard ends it sooner.
		opts.WaitTimeout = 5 * time.Second
	}
	distlocktest.RWLock(t, func(t *testing.T) distlock.Locker {
		l := &memLocker{s: s, flaw: f}
		if f == rwOpenGate || f == rwOneSlot {
			return &rwFlawLocker{memLocker: l}
		}
		return l
	}, opts)
}

func TestRWLockSuiteOnReferenceLocker(t *testing.T) { runRWLockSuite(t, correct) }

// rwFlawEnv names the flaw TestRWLockSuiteOnFlawedLocker runs the suite
// with, in the child process started by TestRWLockSuiteCatchesFlaws.
const rwFlawEnv = "RWLOCKTEST_FLAW"

// TestRWLockSuiteOnFlawedLocker is the child process of
// TestRWLockSuiteCatchesFlaws: it runs the read-write lock suite on a
// flawed locker and is expected to fail. Without the variable it does
// nothing.
func TestRWLockSuiteOnFlawedLocker(t *testing.T) {
	f := flaw(os.Getenv(rwFlawEnv))
	if f == correct {
		t.Log("runs only as the child process of TestRWLockSuiteCatchesFlaws")
		return
	}
	runRWLockSuite(t, f)
}

// TestRWLockSuiteCatchesFlaws runs the read-write lock suite, in a child
// process (a failing suite fails its *testing.T), on lockers with one
// deliberate defect each, and asserts that the named suite test reports
// it with the expected message: a check that passes a broken lock proves
// nothing.
func TestRWLockSuiteCatchesFlaws(t *testing.T) {
	for _, tc := range []struct {
		flaw    flaw
		test    string // suite test that must fail
		message string // regexp its failure output must match
	}{
		// A reader walks in beside a writer, or a second writer; or one
		// holder takes a lock from under another, whose Release then
		// finds it gone.
		{overlap, "Exclusion", `a reader got in while a writer was inside|a writer got in with \d+ readers inside|two writers inside at once|Release: .*lease lost`},
		{flatTokens, "Exclusion", `writer token 1 not above the previous writer's 1`},
		{rwOneSlot, "ReadersOverlap", `only 1 of 4 readers got in at once`},
		{rwOpenGate, "WriterPreference", `called RLock \(event \d+\) after the writer took the gate \(event \d+\) and got in \(event \d+\) before the writer`},
		{lateTake, "CancelWhileWaiting", `(?s)a writer after the readers left: Lock: .*read/\d.*context deadline exceeded`},
		{longValidity, "Fenced/fenced", `when the next writer's Lock returned: the previous writer's lock is still Valid`},
		{unfencedStore, "Fenced/fenced", `the expired writer's late write \(token \d+\) after the next writer's \(token \d+\) = <nil>, want fenced.ErrStaleToken`},
	} {
		t.Run(string(tc.flaw)+"/"+tc.test, func(t *testing.T) {
			t.Parallel()
			catchFlaw(t, "TestRWLockSuiteOnFlawedLocker", rwFlawEnv, tc.flaw, tc.test, tc.message)
		})
	}
}
