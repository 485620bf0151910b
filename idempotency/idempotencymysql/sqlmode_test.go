package idempotencymysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/idempotency"
	"github.com/concurkit/concurkit/idempotency/idempotencymysql"
	"github.com/concurkit/concurkit/idempotency/internal/idemtest"
	"github.com/concurkit/concurkit/testkit"
)

// simultaneous is the session sql_mode of MariaDB's documented
// SIMULTANEOUS_ASSIGNMENT mode, added to the server's default: every
// assignment of an UPDATE (and of ON DUPLICATE KEY UPDATE) reads the
// row's old values, not those of the assignments to its left.
const simultaneous = "CONCAT(@@sql_mode, ',SIMULTANEOUS_ASSIGNMENT')"

// modeDB returns a *sql.DB on a fresh migrated database whose every
// connection sets sql_mode (a DSN system variable: SET sql_mode = <expr>
// at connect); "" keeps the server's default.
func modeDB(t *testing.T, sqlMode string) *sql.DB {
	t.Helper()
	dsn, _ := migrated(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if sqlMode != "" {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["sql_mode"] = sqlMode
	}
	db := testkit.MySQLFor(t, cfg.FormatDSN())
	var mode string
	if err := db.QueryRowContext(t.Context(), `SELECT @@SESSION.sql_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	t.Logf("sql_mode = %s", mode)
	return db
}

// sqlModes are the modes every sql_mode-sensitive test runs under.
var sqlModes = []struct{ name, expr string }{
	{"default", ""},
	{"SIMULTANEOUS_ASSIGNMENT", simultaneous},
}

// TestClaimUnderSQLModes: of concurrent claims of one key, exactly one
// runs, whatever the session's sql_mode. The keys are first released (fn
// failed once) or held by a run presumed crashed (its lock timed out), so
// the claims go through ON DUPLICATE KEY UPDATE, whose assignments must
// not depend on the order MariaDB evaluates them in. Then the whole store
// suite runs under the mode.
func TestClaimUnderSQLModes(t *testing.T) {
	for _, mode := range sqlModes {
		t.Run(mode.name, func(t *testing.T) {
			db := modeDB(t, mode.expr)
			s, err := idempotencymysql.New(db, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			clock := idemtest.NewClock()
			opts := &idempotency.Options{TTL: time.Hour, LockTimeout: time.Minute, Now: clock.Now}
			const keys, dups = 20, 8
			errFirst := errors.New("first run fails")
			crashed := make(chan struct{})
			var holders sync.WaitGroup
			for k := range keys {
				released := fmt.Sprintf("released-%d", k)
				if _, _, err := idempotency.Do(ctx, s, "", released, nil, opts, func(context.Context) (int, error) { return 0, errFirst }); !errors.Is(err, errFirst) {
					t.Fatal(err)
				}
				entered := make(chan struct{})
				holders.Add(1)
				go func() { // a run that never ends: its process is gone
					defer holders.Done()
					_, _, _ = idempotency.Do(ctx, s, "", fmt.Sprintf("stale-%d", k), nil, opts, func(context.Context) (int, error) {
						close(entered)
						<-crashed
						return 0, nil
					})
				}()
				<-entered
			}
			clock.Add(time.Minute) // the crashed runs' locks time out
			var mu sync.Mutex
			runs, running, maxRunning := map[string]int{}, map[string]int{}, map[string]int{}
			var wg sync.WaitGroup
			for _, kind := range []string{"released", "stale"} {
				for k := range keys {
					key := fmt.Sprintf("%s-%d", kind, k)
					barrier := make(chan struct{})
					for range dups {
						wg.Add(1)
						go func() {
							defer wg.Done()
							<-barrier
							_, _, err := idempotency.Do(ctx, s, "", key, nil, opts, func(context.Context) (int, error) {
								mu.Lock()
								runs[key]++
								running[key]++
								maxRunning[key] = max(maxRunning[key], running[key])
								mu.Unlock()
								time.Sleep(20 * time.Millisecond) // a run long enough for the others to try
								mu.Lock()
								running[key]--
								mu.Unlock()
								return 1, nil
							})
							if err != nil && !errors.Is(err, idempotency.ErrInProgress) {
								t.Errorf("%s: %v", key, err)
							}
						}()
					}
					close(barrier)
				}
			}
			wg.Wait()
			close(crashed)
			holders.Wait()
			total := 0
			for _, kind := range []string{"released", "stale"} {
				for k := range keys {
					key := fmt.Sprintf("%s-%d", kind, k)
					total += runs[key]
					if runs[key] != 1 {
						t.Errorf("%s: fn ran %d times (at most %d at once), want once", key, runs[key], maxRunning[key])
					}
				}
			}
			t.Logf("%d keys × %d concurrent claims: fn ran %d times", 2*keys, dups, total)
			newEnv := func(t *testing.T) idemtest.Env {
				db := modeDB(t, mode.expr)
				s, err := idempotencymysql.New(db, nil)
				if err != nil {
					t.Fatal(err)
				}
				return idemtest.Env{Store: s, Counter: idemtest.MySQLCounter(t, db), Rows: func(ctx context.Context) (int, error) {
					var n int
					err := db.QueryRowContext(ctx, `SELECT count(*) FROM concurkit_idempotency_keys`).Scan(&n)
					return n, err
				}}
			}
			t.Run("Suite", func(t *testing.T) { idemtest.Run(t, newEnv) })
		})
	}
}
