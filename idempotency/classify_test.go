package idempotency

import (
	"testing"
	"time"
)

// TestClassify: what a claim's returned record means, for every state a
// key can be in, including records older than the claim (a concurrent
// claim got there first).
func TestClassify(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	fp, other := []byte("fp"), []byte("other")
	req := ClaimRequest{Fingerprint: fp, LockID: 7, Now: now, LockTimeout: time.Minute, TTL: time.Hour}
	live, stale := now.Add(-time.Second), now.Add(-time.Minute)
	later := now.Add(time.Hour)
	done := &Response{Status: 201}
	for _, c := range []struct {
		name string
		rec  Record
		want outcome
	}{
		{"inserted", Record{Fingerprint: fp, LockID: 7, LockedAt: now, Attempts: 1, ExpiresAt: later}, created},
		{"replaced after expiry", Record{Fingerprint: fp, LockID: 7, LockedAt: now, Attempts: 1, ExpiresAt: later}, created},
		{"taken over", Record{Fingerprint: fp, LockID: 7, LockedAt: now, Attempts: 3, RecoveryPoint: "charged", ExpiresAt: later}, resumed},
		{"ours but unlocked (impossible): not a claim", Record{Fingerprint: fp, LockID: 7, Attempts: 1, RecoveryPoint: Finished, Response: done, ExpiresAt: later}, completed},
		{"completed", Record{Fingerprint: fp, LockID: 1, RecoveryPoint: Finished, Response: done, ExpiresAt: later}, completed},
		{"completed, other request", Record{Fingerprint: other, LockID: 1, RecoveryPoint: Finished, Response: done, ExpiresAt: later}, mismatch},
		{"running", Record{Fingerprint: fp, LockID: 1, LockedAt: live, ExpiresAt: later}, inProgress},
		{"running, other request", Record{Fingerprint: other, LockID: 1, LockedAt: live, ExpiresAt: later}, mismatch},
		{"stale lock seen, claim lost to a concurrent one", Record{Fingerprint: fp, LockID: 1, LockedAt: stale, ExpiresAt: later}, inProgress},
		{"released seen, claim lost", Record{Fingerprint: fp, LockID: 1, ExpiresAt: later}, inProgress},
		{"expired seen, claim lost", Record{Fingerprint: other, LockID: 1, RecoveryPoint: Finished, Response: done, ExpiresAt: now}, inProgress},
	} {
		if got := classify(req, c.rec); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
