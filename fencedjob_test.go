package concurkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concurkit/concurkit/fenced"
	"github.com/concurkit/concurkit/fenced/fencedpg"
	"github.com/concurkit/concurkit/optimistic/optimisticpg"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/pessimisticpg"
	"github.com/concurkit/concurkit/retry"
	"github.com/concurkit/concurkit/testkit"
)

// TestFencedReadModifyWrite shows why the README's fenced job reads the
// balance with FOR UPDATE inside the transaction of its fenced write
// (Example_fencedJob), forcing the interleaving that a load test hits by
// chance: a compare-and-swap transfer of 30 from account 1 to account 2
// reads both accounts, then the job reads account 1 and credits 1%
// interest, then the transfer writes.
//
//   - README: the job holds the row lock from its read to its COMMIT; the
//     transfer's UPDATE waits, then finds the version the fenced write
//     bumped (optimistic.ErrConflict), and InTx runs it again on the new
//     balance. The total is the initial one plus the interest, exactly.
//   - Read on the pool, the obvious extension of a write of a constant:
//     nothing stops the transfer from committing between the job's read
//     and its write, which then overwrites the debit — 30 created. The
//     version bump protects compare-and-swap writers from the fenced
//     write, not the fenced write from what it did not see.
func TestFencedReadModifyWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		forUpd  bool
		created int64 // money created besides the interest
	}{{"read FOR UPDATE in the write's transaction", true, 0}, {"read on the pool", false, 30}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			pool := testkit.Postgres(t)
			if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL,
				version bigint NOT NULL DEFAULT 1, max_seen_token bigint NOT NULL DEFAULT 0);
				INSERT INTO accounts (id, balance) VALUES (1, 100), (2, 100)`); err != nil {
				t.Fatal(err)
			}
			accounts := fenced.Table{Name: "accounts", VersionColumn: "version"}

			// The transfer, its first attempt paused after its reads until
			// the job has read too.
			read, jobRead := make(chan struct{}), make(chan struct{})
			attempts := 0
			transferErr := make(chan error, 1)
			go func() {
				opts := &pessimistic.Options{Retry: retry.Policy{MaxAttempts: 10}}
				transferErr <- pessimisticpg.InTx(ctx, pool, opts, func(ctx context.Context, tx pgx.Tx) error {
					attempts++
					var b1, v1, b2, v2 int64
					if err := tx.QueryRow(ctx, "SELECT balance, version FROM accounts WHERE id = 1").Scan(&b1, &v1); err != nil {
						return err
					}
					if err := tx.QueryRow(ctx, "SELECT balance, version FROM accounts WHERE id = 2").Scan(&b2, &v2); err != nil {
						return err
					}
					if attempts == 1 {
						close(read)
						<-jobRead
					}
					if _, err := optimisticpg.Update(ctx, tx, casAccounts, 1, v1, map[string]any{"balance": b1 - 30}); err != nil {
						return err
					}
					_, err := optimisticpg.Update(ctx, tx, casAccounts, 2, v2, map[string]any{"balance": b2 + 30})
					return err
				})
			}()
			<-read

			const token = fenced.Token(1)
			var err error
			if tc.forUpd {
				err = pessimisticpg.InTx(ctx, pool, nil, func(ctx context.Context, tx pgx.Tx) error {
					var balance int64
					if err := tx.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1 FOR UPDATE", 1).Scan(&balance); err != nil {
						return err
					}
					close(jobRead) // the transfer's UPDATE now waits for this COMMIT
					return fencedpg.Update(ctx, tx, accounts, 1, token, map[string]any{"balance": balance + balance/100})
				})
			} else {
				var balance int64
				if err = pool.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1", 1).Scan(&balance); err == nil {
					close(jobRead)
					if err = <-transferErr; err != nil { // the transfer commits first
						t.Fatalf("transfer: %v", err)
					}
					transferErr <- nil
					err = fencedpg.Update(ctx, pool, accounts, 1, token, map[string]any{"balance": balance + balance/100})
				}
			}
			if err != nil {
				t.Fatalf("job: %v", err)
			}
			if err := <-transferErr; err != nil {
				t.Fatalf("transfer: %v", err)
			}
			var total int64
			if err := pool.QueryRow(ctx, "SELECT sum(balance) FROM accounts").Scan(&total); err != nil {
				t.Fatal(err)
			}
			const interest = 1 // 1% of 100
			if got := total - 200 - interest; got != tc.created {
				t.Errorf("total %d: %+d created besides the interest, want %+d (transfer attempts: %d)", total, got, tc.created, attempts)
			}
			t.Logf("total %d after 1 transfer and 1 interest credit; transfer attempts %d", total, attempts)
		})
	}
}
