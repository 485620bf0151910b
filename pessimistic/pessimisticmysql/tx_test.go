package pessimisticmysql

import (
	"context"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit"
	"github.com/concurkit/concurkit/pessimistic"
	"github.com/concurkit/concurkit/pessimistic/internal/txn"
)

// commitTx is a transaction whose COMMIT fails with errs in turn (then
// succeeds), classified by myTx.CommitError.
type commitTx struct {
	errs    *[]error
	commits *int
}

func (c commitTx) Commit(context.Context) error {
	*c.commits++
	if len(*c.errs) == 0 {
		return nil
	}
	err := (*c.errs)[0]
	*c.errs = (*c.errs)[1:]
	return err
}
func (commitTx) Rollback(context.Context) {}
func (commitTx) End(context.Context)      {}
func (commitTx) CommitError(ctx context.Context, err error) error {
	return (*myTx)(nil).CommitError(ctx, err)
}

// TestCommitDeadlockRetried: a 1213 answered to COMMIT — on Galera, a
// certification failure, or a brute-force abort the transaction learns at
// COMMIT — means the transaction did not commit. It is a definite failure,
// never a *concurkit.AmbiguousCommitError, and InTx's loop, under the
// default options, maps it to ErrDeadlock and runs the whole transaction
// again. A COMMIT whose answer was lost stays ambiguous and is not retried.
func TestCommitDeadlockRetried(t *testing.T) {
	ctx := context.Background()
	cert := &mysql.MySQLError{Number: 1213, SQLState: [5]byte{'4', '0', '0', '0', '1'}, Message: "Deadlock found when trying to get lock; try restarting transaction"}
	if err := (*myTx)(nil).CommitError(ctx, cert); err != error(cert) {
		t.Fatalf("CommitError(1213) = %v, want the server's error as it is", err)
	}
	o, err := txn.Resolve(pkg, nil)
	if err != nil {
		t.Fatal(err)
	}
	mapErr := func(ctx context.Context, err error) error { return mapError(ctx, err, txn.UnknownWait) }
	for _, tc := range []struct {
		name    string
		errs    []error
		commits int
		want    func(error) bool
	}{
		{"certification failure", []error{cert, cert}, 3, func(err error) bool { return err == nil }},
		{"answer lost", []error{mysql.ErrInvalidConn}, 1, func(err error) bool {
			return errors.Is(err, concurkit.ErrOutcomeUnknown) && !errors.Is(err, pessimistic.ErrDeadlock)
		}},
	} {
		errs, commits, runs := tc.errs, 0, 0
		err := txn.Run(ctx, o,
			func(context.Context) (commitTx, error) { return commitTx{&errs, &commits}, nil },
			func(context.Context, commitTx) error { runs++; return nil },
			mapErr)
		if !tc.want(err) || commits != tc.commits || runs != tc.commits {
			t.Errorf("%s: %v after %d runs and %d commits; want %d of each", tc.name, err, runs, commits, tc.commits)
		}
	}
}
