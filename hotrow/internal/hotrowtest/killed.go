package hotrowtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/hotrow"
)

// KillEnv is the environment variable that turns a test binary into the
// client process of KilledClient; its value is the database's URL or DSN.
const KillEnv = "CONCURKIT_HOTROW_KILLED_CLIENT"

// KillWorkers is the number of goroutines of the killed client: each has at
// most one update in flight, so at most KillWorkers updates are
// unacknowledged when the process dies.
const KillWorkers = 32

// KilledClientChild is the client process of KilledClient: KillWorkers
// goroutines add 1 to key through one Combiner on store, each writing the
// line "ack" to out once its update was acknowledged and only then sending
// the next, until the process is killed. It never returns.
func KilledClientChild(store hotrow.Store[int64], key int64, out io.Writer) {
	c, err := hotrow.NewCombiner[int64](store, nil)
	if err != nil {
		fmt.Fprintln(out, "error", err)
		select {}
	}
	var mu sync.Mutex
	for range KillWorkers {
		go func() {
			for {
				if _, err := c.Add(context.Background(), key, 1); err != nil {
					mu.Lock()
					fmt.Fprintln(out, "error", err)
					mu.Unlock()
					continue
				}
				mu.Lock()
				_, _ = io.WriteString(out, "ack\n") // one write: a line is whole or absent
				mu.Unlock()
			}
		}()
	}
	select {}
}

// KilledClient starts cmd (the test binary re-run as KilledClientChild,
// with KillEnv set), reads its acknowledgements, SIGKILLs it after a random
// number of them (between 2,000 and 4,000: batches are in flight), and
// checks the row: it must hold initial plus every acknowledged update plus
// a subset of the unacknowledged ones — at most one per worker, plus any
// the client saw fail — never more. value reads the row.
func KilledClient(t *testing.T, cmd *exec.Cmd, initial int64, value func(t *testing.T) int64) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A child that never acknowledges (server down) is killed too.
	guard := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	defer guard.Stop()
	killAt := 2000 + rand.IntN(2001)
	var acks, errs int
	var firstErr string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "ack":
			acks++
			if acks == killAt {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			}
		default:
			// An update that failed may still have committed (an
			// ambiguous outcome): it widens the bound.
			errs++
			if firstErr == "" {
				firstErr = line
			}
		}
	}
	// After the kill the pipe still holds what the child wrote: reading to
	// EOF counts every acknowledgement it printed.
	_ = cmd.Wait()
	if acks < killAt {
		t.Fatalf("the client printed %d acknowledgements before it ended (first error %q; stderr %s)", acks, firstErr, stderr.String())
	}
	got := value(t) - initial
	t.Logf("killed after %d acknowledged updates (%d failed); the row holds %d (%d unacknowledged ones committed)", acks, errs, got, got-int64(acks))
	if got < int64(acks) {
		t.Errorf("the row holds %d updates: %d were acknowledged (an acknowledged update was lost)", got, acks)
	}
	if got > int64(acks+errs)+KillWorkers {
		t.Errorf("the row holds %d updates: %d acknowledged, %d failed and at most %d in flight (an update was applied twice)", got, acks, errs, KillWorkers)
	}
}
