package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/testkit"
)

// TestCheckIdempotent feeds the checker hand-made histories and effects:
// one it must accept, then one anomaly each.
func TestCheckIdempotent(t *testing.T) {
	req := func(p int, key string, o Outcome, ret int64) Op {
		return Op{Process: p, Seq: 1, Kind: "request", Key: key, Outcome: o, Ret: ret}
	}
	att := func(key string, status int64, call, ret time.Duration) Op {
		return Op{Kind: "attempt", Key: key, Outcome: OK, Ret: status, Call: int64(call), Return: int64(ret)}
	}
	cancelled := Op{Kind: "attempt", Key: "k1", Outcome: Unknown, Err: idemCancelled}
	valid := []Op{
		req(1, "k1", OK, 11), cancelled, att("k1", 409, time.Second, time.Second+time.Millisecond), att("k1", 201, 2*time.Second, 2*time.Second),
		req(1, "k2", Unknown, 0),
		req(2, "k3", Pending, 0),
		// k4 ran twice, but the middleware said its first run's response
		// was not stored: the documented at-least-once window.
		req(2, "k4", OK, 41), {Kind: "unstored", Key: "k4", Outcome: OK},
	}
	validEffects := []effectRow{{11, "k1", 1}, {31, "k3", 2}, {40, "k4", 2}, {41, "k4", 2}}
	for _, tc := range []struct {
		name    string
		ops     []Op
		effects []effectRow
		want    []string
	}{
		{"valid", valid, validEffects, nil},
		{"duplicate", valid, append(slices.Clone(validEffects), effectRow{12, "k1", 1}), []string{"duplicate-effect"}},
		{"duplicate of an ambiguous request", valid, append(slices.Clone(validEffects), effectRow{21, "k2", 1}, effectRow{22, "k2", 1}), []string{"duplicate-effect"}},
		{"wrong answer", valid, append([]effectRow{{12, "k1", 1}}, validEffects[1:]...), []string{"wrong-answer"}},
		{"lost effect", valid, validEffects[1:], []string{"lost-effect"}},
		{"unknown key", valid, append(slices.Clone(validEffects), effectRow{99, "kx", 3}), []string{"unknown-key"}},
		{"refused", append(slices.Clone(valid), Op{Kind: "request", Key: "k5", Outcome: Fail, Err: "chaos: answer 422"}), validEffects, []string{"refused"}},
		{"blocked", append(slices.Clone(valid), att("k1", 409, 3*time.Second, 9*time.Second)), validEffects, []string{"blocked"}},
	} {
		r := checkIdempotent(tc.ops, tc.effects, 5*time.Second)
		got := slices.Sorted(maps.Keys(r.Counts))
		if !slices.Equal(got, tc.want) || r.Valid != (len(tc.want) == 0) {
			t.Errorf("%s: anomalies %v (valid %v), want %v\n%+v", tc.name, got, r.Valid, tc.want, r.Anomalies)
		}
	}
	if s := tallyIdempotent(valid).cancelledShare(); s != 0.25 {
		t.Errorf("cancelled share %v, want 1 of 4 requests", s)
	}
}

// TestIdempotentFinal: which answers end a request, and how.
func TestIdempotentFinal(t *testing.T) {
	for _, tc := range []struct {
		rep   idemReply
		final bool
		o     Outcome
	}{
		{idemReply{err: errIdemCancelled}, false, Pending},
		{idemReply{status: 201, effect: 7}, true, OK},
		{idemReply{status: 201, effect: 7, replayed: true}, true, OK},
		{idemReply{status: 201, err: errors.New("no id")}, true, Fail},
		{idemReply{status: 409}, false, Pending},
		{idemReply{status: 429}, false, Pending},
		{idemReply{status: 503}, false, Pending},
		{idemReply{status: 500}, false, Pending}, // released, or stored: the retry tells
		{idemReply{status: 500, replayed: true}, true, Unknown},
		{idemReply{status: 422}, true, Fail},
		{idemReply{status: 400, replayed: true}, true, Fail},
		{idemReply{status: 500, replayed: true, handlerCancelled: true}, true, Fail},
		{idemReply{status: 200, replayed: true}, true, Fail},
		{idemReply{status: 500, handlerCancelled: true}, false, Pending}, // not stored: the retry runs
		{idemReply{status: 200}, false, Pending},                         // not the handler's answer: retried
	} {
		final, o, _ := idemFinal(tc.rep)
		if final != tc.final || (final && o != tc.o) {
			t.Errorf("%+v: final %v %v, want %v %v", tc.rep, final, o, tc.final, tc.o)
		}
	}
	// The checker names the two replays the middleware must never make.
	ops := func(err error) []Op {
		return []Op{{Process: 1, Seq: 1, Kind: "request", Key: "k", Outcome: Fail, Err: err.Error()}}
	}
	for err, kind := range map[error]string{
		errStoredCancellation:                    "stored-cancellation",
		fmt.Errorf("%w: %d", errFabricated, 200): "fabricated-answer",
	} {
		if r := checkIdempotent(ops(err), nil, time.Second); r.Counts[kind] != 1 {
			t.Errorf("%v: anomalies %v, want %s", err, r.Counts, kind)
		}
	}
}

// memEffects is an effectStore in memory; add blocks until ctx ends when
// hang is set.
type memEffects struct {
	hang bool
	mu   sync.Mutex
	rows []effectRow
}

// add records the effect, or hangs.
func (m *memEffects) add(ctx context.Context, key string, id int64, process int) error {
	if m.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows = append(m.rows, effectRow{id, key, process})
	return nil
}

// refused: never sure, as on DynamoDB.
func (*memEffects) refused(error) bool { return false }

// downStore claims every key and fails to store any response: the store
// going down between a run's claim and its completion.
type downStore struct{}

// Claim grants every claim, as new.
func (downStore) Claim(_ context.Context, r idempotency.ClaimRequest) (idempotency.Record, error) {
	return idempotency.Record{Principal: r.Principal, Key: r.Key, Fingerprint: r.Fingerprint, LockID: r.LockID,
		LockedAt: r.Now, RecoveryPoint: idempotency.Started, Attempts: 1, CreatedAt: r.Now, LastRunAt: r.Now, ExpiresAt: r.ExpiresAt()}, nil
}

// Complete fails: the store is down.
func (downStore) Complete(context.Context, idempotency.Lock, idempotency.Response, time.Time) error {
	return errors.New("store down")
}

// Release succeeds.
func (downStore) Release(context.Context, idempotency.Lock) error { return nil }

// Reap has nothing to reap.
func (downStore) Reap(context.Context, time.Time, int) (int, error) { return 0, nil }

var _ idempotency.Store = downStore{}

// TestIdempotentUnstored holds idemLog to the middleware's messages: a
// response the store could not keep, and a handler that outlived its
// context, are each recorded as an "unstored" event of their key, which
// the checker counts as a permitted second run.
func TestIdempotentUnstored(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hang   bool
		status int
	}{
		{"store down", false, http.StatusCreated},
		{"handler outlived its context", true, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			c := &client{env: env{Run: "chaos_test", Seed: 1}, process: 3, rng: rand.New(rand.NewPCG(1, 3)), out: &out}
			effects := &memEffects{hang: tc.hang}
			h, err := idemServer(c, downStore{}, effects, idemOptions{lockTimeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			ic := &idemClient{c: c, url: srv.URL, http: srv.Client(), timeout: 5 * time.Second, typical: time.Millisecond}
			rep := ic.send(t.Context(), "chaos_test-3-1", []byte(`{"key":"chaos_test-3-1"}`))
			if rep.status != tc.status {
				t.Fatalf("status %d (%v), want %d", rep.status, rep.err, tc.status)
			}
			ops, err := ReadHistory(&out)
			if err != nil {
				t.Fatal(err)
			}
			if n := tallyIdempotent(ops).unstored["chaos_test-3-1"]; n != 1 {
				t.Errorf("%d unstored events of the key, want 1: %+v", n, ops)
			}
			if want := map[bool]int{false: 1, true: 0}[tc.hang]; len(effects.rows) != want {
				t.Errorf("%d effects, want %d", len(effects.rows), want)
			}
		})
	}
}

// idemEndpoints resolves the server of backend through testkit:
// unreachable fails the test under CI=true and skips it otherwise.
func idemEndpoints(t *testing.T, backend string) *Endpoints {
	t.Helper()
	switch backend {
	case "postgres":
		return &Endpoints{Postgres: testkit.PostgresServerURL(t)}
	case "mysql":
		return &Endpoints{MySQL: testkit.MySQLServerDSN(t)}
	case "dynamodb":
		return &Endpoints{DynamoDB: testkit.DynamoDBEndpoint(t)}
	}
	t.Fatalf("backend %q", backend)
	return nil
}

// TestIdempotent is the short form of the idempotent-HTTP runs: with every
// nemesis, the middleware must leave no anomaly while at least 10% of the
// requests are cancelled by their client and retried; the same seed
// without it must show duplicate effects.
func TestIdempotent(t *testing.T) {
	// DynamoDB's runs are make chaos's: CI's chaos runs share 3 minutes.
	// MariaDB's run is under SIMULTANEOUS_ASSIGNMENT, where the claims
	// once broke.
	options := map[string]map[string]string{"mysql": {"sql_mode": "SIMULTANEOUS_ASSIGNMENT"}}
	for _, backend := range []string{"postgres", "mysql"} {
		t.Run(backend, func(t *testing.T) { // safe and unsafe side by side
			bothWays(t, func(t *testing.T, unsafe bool) {
				out := t.TempDir()
				s, err := Run(t.Context(), &Config{
					Workload: "idempotent", Backend: backend, Unsafe: unsafe, Endpoints: idemEndpoints(t, backend),
					Duration: 10 * time.Second, TTL: 300 * time.Millisecond, Seed: 20261207, Out: out, Options: options[backend],
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Log(s)
				f, err := os.Open(filepath.Join(out, "history.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				ops, err := ReadHistory(f)
				if err != nil {
					t.Fatal(err)
				}
				tally := tallyIdempotent(ops)
				if tally.outcomes[OK] == 0 || len(s.Faults) == 0 {
					t.Fatalf("no request answered or no fault: the run proves nothing\n%s", s)
				}
				if share := tally.cancelledShare(); share < 0.10 {
					t.Errorf("%.1f%% of requests cancelled, want at least 10%%", 100*share)
				}
				checkVerdict(t, s, unsafe, "the middleware", "duplicate-effect", true)
			})
		})
	}
}

// TestIdemBlockedBound: with latency the only fault, a key may answer 409
// only while a run is in progress, so a claim left behind until the lock
// timeout is found; any fault that can stop a run or lose an answer
// brings the lock timeout back into the bound.
func TestIdemBlockedBound(t *testing.T) {
	const lock, ttl = 10 * time.Second, 300 * time.Millisecond
	if b := idemBlockedBound(lock, ttl, []string{NemesisLatency}); b >= lock {
		t.Errorf("latency only: bound %s, want below the lock timeout %s", b, lock)
	}
	for _, k := range []string{NemesisKill, NemesisPause, NemesisDrop, NemesisReset, NemesisFreeze, NemesisTerminate, NemesisServerPause, NemesisServerKill} {
		if b := idemBlockedBound(lock, ttl, []string{NemesisLatency, k}); b < 2*lock {
			t.Errorf("latency and %s: bound %s, want at least two lock timeouts", k, b)
		}
	}
	if b := idemBlockedBound(lock, ttl, nil); b < 2*lock {
		t.Errorf("no nemesis list: bound %s, want the loose one", b)
	}
}
