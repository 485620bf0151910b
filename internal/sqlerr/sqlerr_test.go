package sqlerr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concurkit/concurkit/internal/sqlerr"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err       error
		want      sqlerr.Class
		retryable bool
	}{
		{nil, sqlerr.Unknown, false},
		{errors.New("boom"), sqlerr.Unknown, false},
		{&pgconn.PgError{Code: "40001"}, sqlerr.Serialization, true},
		{&pgconn.PgError{Code: "40P01"}, sqlerr.Deadlock, true},
		{&pgconn.PgError{Code: "55P03"}, sqlerr.LockNotAvailable, false},
		{&pgconn.PgError{Code: "23505"}, sqlerr.UniqueViolation, false},
		{&pgconn.PgError{Code: "57014"}, sqlerr.QueryCanceled, false},
		{&pgconn.PgError{Code: "42601"}, sqlerr.Unknown, false},
		// MySQL errors are internal/mysqlerr's: this package does not link the driver.
		{&mysql.MySQLError{Number: 1213}, sqlerr.Unknown, false},
		{fmt.Errorf("tx: %w", &pgconn.PgError{Code: "40P01"}), sqlerr.Deadlock, true},
	} {
		if got := sqlerr.Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if got := sqlerr.Retryable(tc.err); got != tc.retryable {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.retryable)
		}
	}
	if s := sqlerr.Class(99).String(); s != "unknown" {
		t.Errorf("out-of-range class prints %q", s)
	}
}
