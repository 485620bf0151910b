package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// workerEnv carries a client process's spec (JSON) from the run to the
// process it starts.
const workerEnv = "CONCURKIT_CHAOS_WORKER"

// spec is what a client process needs to know: the run's settings, with
// the endpoints pointing at the run's proxies.
type spec struct {
	env
	Process int `json:"process"`
}

// env is a run's settings as the workload sees them.
type env struct {
	Workload  string            `json:"workload"`
	Backend   string            `json:"backend"`
	Unsafe    bool              `json:"unsafe,omitempty"`
	Run       string            `json:"run"` // names the run's tables and keys
	Seed      uint64            `json:"seed"`
	TTL       time.Duration     `json:"ttl"`
	Endpoints Endpoints         `json:"endpoints"`
	Options   map[string]string `json:"options,omitempty"`
	// Nemeses are the run's fault kinds (a checker's bounds may depend
	// on them).
	Nemeses []string `json:"nemeses,omitempty"`
}

// IsWorker reports whether this process was started by Run as a client
// process; if so, the program's main (or TestMain) must call WorkerMain
// and exit with its result before doing anything else:
//
//	func main() {
//		if chaos.IsWorker() {
//			os.Exit(chaos.WorkerMain())
//		}
//		…
//	}
func IsWorker() bool { return os.Getenv(workerEnv) != "" }

// WorkerMain runs the client process Run started: it runs the workload's
// client loop, writing each operation's invocation and completion to
// standard output as JSON lines, until standard input closes (the run
// ending) or the process gets SIGTERM or SIGINT. It returns the exit
// code: 0, or 2 with the reason on standard error.
func WorkerMain() int {
	var s spec
	if err := json.Unmarshal([]byte(os.Getenv(workerEnv)), &s); err != nil {
		fmt.Fprintf(os.Stderr, "chaos worker: bad %s: %v\n", workerEnv, err)
		return 2
	}
	w, ok := workloads[s.Workload]
	if !ok {
		fmt.Fprintf(os.Stderr, "chaos worker: unknown workload %q\n", s.Workload)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	go func() { // the run closes our stdin to stop us
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	c := &client{env: s.env, process: s.Process, out: os.Stdout,
		rng: rand.New(rand.NewPCG(s.Seed, uint64(s.Process)))}
	if err := w.client(ctx, c); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "chaos worker %d: %v\n", s.Process, err)
		return 2
	}
	return 0
}

// client is one client process's view of the run: its settings, its
// random source and its history writer.
type client struct {
	env
	process int
	rng     *rand.Rand

	mu  sync.Mutex
	out io.Writer
	seq int64
}

// defaultCancel is the share of operations opContext cancels at a random
// point when Options["cancel"] does not say.
const defaultCancel = 0.1

// opContext bounds one operation by timeout and, for a share of the
// operations (Options["cancel"], a probability; default defaultCancel),
// ends it earlier at a random point within its first 20 ms: a client that
// gives up before the request is sent, while it runs, or before the
// answer (of a COMMIT, of a Release) arrives. Not safe for concurrent
// use: it draws on the client's random source.
func (c *client) opContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	p := defaultCancel
	if v, ok := c.Options["cancel"]; ok {
		if x, err := strconv.ParseFloat(v, 64); err == nil && x >= 0 && x <= 1 {
			p = x
		}
	}
	if c.rng.Float64() < p {
		timeout = min(timeout, time.Duration(c.rng.Int64N(int64(20*time.Millisecond))))
	}
	return context.WithTimeout(ctx, timeout)
}

// invoke records the invocation of op and returns it numbered and timed;
// pass it to complete once its outcome is known.
func (c *client) invoke(op Op) Op {
	c.mu.Lock()
	c.seq++
	op.Process, op.Seq, op.Call = c.process, c.seq, time.Now().UnixNano()
	c.mu.Unlock()
	c.emit(op)
	return op
}

// complete records op's outcome (err's text is kept).
func (c *client) complete(op Op, o Outcome, err error) {
	op.Return, op.Outcome = time.Now().UnixNano(), o
	if err != nil {
		op.Err = err.Error()
	}
	c.emit(op)
}

func (c *client) emit(op Op) {
	b, _ := json.Marshal(op) // Op has no field that fails to encode
	b = append(b, '\n')
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.out.Write(b) // one write per line: a kill loses whole lines only
}

// worker is a client process as the run sees it.
type worker struct {
	id    int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed once the process exited and its output was read
	errs  strings.Builder
	err   error // from Wait
}

// crew starts and stops the run's client processes and feeds their
// histories into one History.
type crew struct {
	argv []string
	spec spec
	hist *History
	// holding tracks which processes hold a lease (an acquire completed OK
	// and no release invoked since), and reading which of them are between
	// a fenced read and the write it leads to (their last event a read
	// with a token that completed OK): the nemesis that pauses clients
	// prefers those, the worst moment for a GC pause.
	mu      sync.Mutex
	holding map[int]bool
	reading map[int]bool
	live    map[int]*worker
	next    int
	exited  []*worker
	// working is closed when the first operation completes OK.
	working     chan struct{}
	workingOnce sync.Once
}

func newCrew(argv []string, s spec, h *History) *crew {
	return &crew{argv: argv, spec: s, hist: h, holding: map[int]bool{}, reading: map[int]bool{}, live: map[int]*worker{},
		working: make(chan struct{})}
}

// start starts one more client process.
func (c *crew) start() error {
	c.mu.Lock()
	c.next++
	id := c.next
	c.mu.Unlock()
	s := c.spec
	s.Process = id
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("chaos: worker spec: %w", err)
	}
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	w := &worker{id: id, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{b: &w.errs}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("chaos: worker %d: %w", id, err)
	}
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		return fmt.Errorf("chaos: worker %d: %w", id, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start worker %d (%s): %w", id, c.argv[0], err)
	}
	c.mu.Lock()
	c.live[id] = w
	c.mu.Unlock()
	go func() {
		c.read(stdout)
		w.err = cmd.Wait()
		c.mu.Lock()
		delete(c.live, id)
		delete(c.holding, id)
		delete(c.reading, id)
		c.exited = append(c.exited, w)
		c.mu.Unlock()
		close(w.done)
	}()
	return nil
}

// read adds a worker's history lines to the run's History.
func (c *crew) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var op Op
		if json.Unmarshal(sc.Bytes(), &op) != nil {
			continue // a line cut by a kill
		}
		c.hist.Add(op)
		if op.Outcome == OK {
			c.workingOnce.Do(func() { close(c.working) })
		}
		c.mu.Lock()
		switch {
		case op.Kind == "acquire" && op.Outcome == OK:
			c.holding[op.Process] = true
		case op.Kind == "release" && op.Outcome == Pending:
			delete(c.holding, op.Process)
		}
		c.reading[op.Process] = op.Kind == "read" && op.Outcome == OK && op.Token != 0
		c.mu.Unlock()
	}
}

// pick returns a live worker — if preferHolder, one between its fenced
// read and its write if there is one, else a lease holder if there is
// one; nil if none is live. r makes the choice reproducible.
func (c *crew) pick(r *rand.Rand, preferHolder bool) *worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pool []*worker
	if preferHolder {
		for _, set := range []map[int]bool{c.reading, c.holding} {
			for id, ok := range set {
				if w := c.live[id]; ok && w != nil {
					pool = append(pool, w)
				}
			}
			if len(pool) > 0 {
				break
			}
		}
	}
	if len(pool) == 0 {
		for _, w := range c.live {
			pool = append(pool, w)
		}
	}
	if len(pool) == 0 {
		return nil
	}
	// Map iteration order is random: sort by id so the seed decides.
	for i := 1; i < len(pool); i++ {
		for j := i; j > 0 && pool[j].id < pool[j-1].id; j-- {
			pool[j], pool[j-1] = pool[j-1], pool[j]
		}
	}
	return pool[r.IntN(len(pool))]
}

// stop asks every live worker to finish (closing its stdin, after
// resuming it in case it is paused), waits up to grace, then kills the
// rest. It returns the errors of workers that failed on their own (a
// worker the nemesis killed is not an error).
func (c *crew) stop(grace time.Duration, killed map[int]bool) error {
	c.mu.Lock()
	ws := make([]*worker, 0, len(c.live))
	for _, w := range c.live {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	for _, w := range ws {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.stdin.Close()
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for _, w := range ws {
		select {
		case <-w.done:
		case <-timer.C:
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	}
	var errs []error
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.exited {
		if w.err != nil && !killed[w.id] {
			errs = append(errs, fmt.Errorf("chaos: worker %d: %w: %s", w.id, w.err, excerpt(w.errs.String())))
		}
	}
	return errors.Join(errs...)
}

// excerpt is what a failed worker's stderr shows: a race detector's
// report from its start (its two stacks say where; its end says little),
// else the last 2,000 bytes.
func excerpt(s string) string {
	if i := strings.Index(s, "WARNING: DATA RACE"); i >= 0 {
		r := s[i:]
		if len(r) > 8000 {
			r = r[:8000] + "…"
		}
		return r
	}
	return tail(s, 2000)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}

// lockedWriter lets a process's stderr be read while it is written.
type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() < 1<<20 {
		w.b.Write(p)
	}
	return len(p), nil
}

// sleepCtx waits d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
