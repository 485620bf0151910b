package idempotencymysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencymysql"
	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
	"github.com/concurkit/concurkit/testkit"
)

// TestDSNOptions runs the suite through a DSN without parseTime (DATETIME
// arrives as text), with clientFoundRows (an UPDATE reports the rows it
// matched, not those it changed) and interpolateParams (no server-side
// prepared statements): the store must not depend on any of them.
func TestDSNOptions(t *testing.T) {
	newDB := func(t *testing.T) *sql.DB {
		dsn, _ := migrated(t)
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ParseTime, cfg.ClientFoundRows, cfg.InterpolateParams = false, true, true
		return testkit.MySQLFor(t, cfg.FormatDSN())
	}
	newEnv := func(t *testing.T) idemtest.Env {
		db := newDB(t)
		s, err := idempotencymysql.New(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		return idemtest.MySQLEnv(t, db, s)
	}
	t.Run("Conformance", func(t *testing.T) { idemtest.Conformance(t, newEnv) })
	t.Run("Expiry", func(t *testing.T) { idemtest.Expiry(t, newEnv(t)) })
	t.Run("Reap", func(t *testing.T) { idemtest.Reap(t, newEnv(t)) })
	t.Run("TakeOver", func(t *testing.T) { idemtest.TakeOver(t, newEnv(t)) })
	t.Run("Do", func(t *testing.T) { idemtest.Do(t, newEnv(t)) })
	t.Run("Concurrent", func(t *testing.T) { idemtest.Concurrent(t, newEnv(t), 40, 8) })
}

// TestDSNLocation: the store keeps times as UTC wall clocks whatever the
// DSN's loc and parseTime, so that what it reads back is the instant it
// wrote. The driver converts a time.Time argument to loc's wall clock;
// with parseTime=false a DATETIME read back as text carries no zone, so a
// DSN with loc=America/New_York shifted every stored time by 5 hours: with
// a TTL under the offset, a completed key read back as expired, and its
// retry got ErrInProgress (409) instead of the stored result.
func TestDSNLocation(t *testing.T) {
	for _, c := range []struct {
		loc       string
		parseTime bool
	}{
		{"America/New_York", false}, {"America/New_York", true},
		{"Asia/Kolkata", false}, {"Asia/Kolkata", true}, {"UTC", false},
	} {
		t.Run(fmt.Sprintf("%s/parseTime=%v", c.loc, c.parseTime), func(t *testing.T) {
			ctx := t.Context()
			dsn, admin := migrated(t)
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Loc, err = time.LoadLocation(c.loc); err != nil {
				t.Fatal(err)
			}
			cfg.ParseTime = c.parseTime
			s, err := idempotencymysql.New(testkit.MySQLFor(t, cfg.FormatDSN()), nil)
			if err != nil {
				t.Fatal(err)
			}
			clock := idemtest.NewClock()
			opts := &idempotency.Options{TTL: time.Hour, LockTimeout: time.Minute, Now: clock.Now}
			runs := 0
			fn := func(context.Context) (int, error) { runs++; return 42, nil }
			if _, _, err := idempotency.Do(ctx, s, "", "k1", nil, opts, fn); err != nil {
				t.Fatal(err)
			}
			clock.Add(30 * time.Minute)
			v, replayed, err := idempotency.Do(ctx, s, "", "k1", nil, opts, fn)
			if err != nil || !replayed || v != 42 || runs != 1 {
				t.Fatalf("retry within the TTL: %v replayed=%v %v (runs %d), want the stored 42", v, replayed, err, runs)
			}
			// The column holds the UTC wall clock, whoever wrote it.
			var exp string
			if err := admin.QueryRowContext(ctx, `SELECT DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s') FROM concurkit_idempotency_keys`).Scan(&exp); err != nil {
				t.Fatal(err)
			}
			if want := clock.Now().Add(-30 * time.Minute).Add(time.Hour).UTC().Format(time.DateTime); exp != want {
				t.Fatalf("expires_at stored as %s, want %s (UTC)", exp, want)
			}
			// A claim's record carries the instants written.
			rec, err := s.Claim(ctx, idempotency.ClaimRequest{Key: "k2", Fingerprint: []byte("fp"), LockID: 7, Now: clock.Now(), LockTimeout: time.Minute, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if !rec.LockedAt.Equal(clock.Now()) || !rec.ExpiresAt.Equal(clock.Now().Add(time.Hour)) || !rec.CreatedAt.Equal(clock.Now()) {
				t.Fatalf("record times locked %v, expires %v, created %v; want %v and %v", rec.LockedAt, rec.ExpiresAt, rec.CreatedAt, clock.Now(), clock.Now().Add(time.Hour))
			}
		})
	}
}

// TestPacketTooLargeEscaped: with interpolateParams the driver sends the
// body escaped in the statement's text, up to twice its size; a body under
// max_allowed_packet whose escaped form is over it is refused by the
// server (error 1153, the connection closed), which Complete reports as
// ErrResponseTooLarge.
func TestPacketTooLargeEscaped(t *testing.T) {
	dsn, admin := migrated(t)
	var limit int
	if err := admin.QueryRowContext(t.Context(), `SELECT @@max_allowed_packet`).Scan(&limit); err != nil {
		t.Fatal(err)
	}
	if limit > 64<<20 {
		testkit.Unsupported(t, "max_allowed_packet is %d, above the 64 MiB this test fills", limit)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	s, err := idempotencymysql.New(testkit.MySQLFor(t, cfg.FormatDSN()), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := idemtest.NewClock().Now()
	req := idempotency.ClaimRequest{Key: "k1", Fingerprint: []byte("fp"), LockID: 7, Now: now, LockTimeout: time.Minute, TTL: time.Hour}
	if _, err := s.Claim(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, limit*3/4) // NUL bytes: each escaped as two
	err = s.Complete(t.Context(), idempotency.Lock{Key: "k1", ID: 7}, idempotency.Response{Status: 200, Body: body}, now.Add(time.Hour))
	if !errors.Is(err, idempotency.ErrResponseTooLarge) {
		t.Fatalf("Complete of %d bytes escaped to about %d, max_allowed_packet %d: %v, want ErrResponseTooLarge", len(body), 2*len(body), limit, err)
	}
	// The key is still held: a marker completes it.
	if err := s.Complete(t.Context(), idempotency.Lock{Key: "k1", ID: 7}, idempotency.Response{Status: 410, Body: []byte("marker")}, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
}
