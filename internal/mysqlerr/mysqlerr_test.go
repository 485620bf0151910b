package mysqlerr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/internal/mysqlerr"
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
		{&mysql.MySQLError{Number: 1213}, sqlerr.Deadlock, true},
		// MariaDB 11.6+ (innodb_snapshot_isolation=ON): a REPEATABLE READ
		// write conflict, transaction rolled back.
		{&mysql.MySQLError{Number: 1020, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: "Record has changed since last read in table 't'"}, sqlerr.Serialization, true},
		{fmt.Errorf("optimistic: update: %w", &mysql.MySQLError{Number: 1020}), sqlerr.Serialization, true},
		{&mysql.MySQLError{Number: 1205}, sqlerr.LockTimeout, false},
		{&mysql.MySQLError{Number: 3572}, sqlerr.LockNotAvailable, false},
		{&mysql.MySQLError{Number: 1062}, sqlerr.UniqueViolation, false},
		{&mysql.MySQLError{Number: 1969}, sqlerr.QueryCanceled, false},
		{&mysql.MySQLError{Number: 1064}, sqlerr.Unknown, false},
		{errors.Join(errors.New("ctx"), &mysql.MySQLError{Number: 1213}), sqlerr.Deadlock, true},
	} {
		if got := mysqlerr.Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if got := mysqlerr.Retryable(tc.err); got != tc.retryable {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.retryable)
		}
	}
	if n := mysqlerr.Number(fmt.Errorf("w: %w", &mysql.MySQLError{Number: 1205})); n != 1205 {
		t.Errorf("Number = %d", n)
	}
}

func TestMark(t *testing.T) {
	dl := fmt.Errorf("op: %w", &mysql.MySQLError{Number: 1213, Message: "deadlock"})
	marked := mysqlerr.Mark(dl)
	var r interface{ Retryable() bool }
	if !errors.As(marked, &r) || !r.Retryable() {
		t.Fatal("a marked deadlock does not declare itself retryable")
	}
	if marked.Error() != dl.Error() || !errors.Is(marked, dl) || mysqlerr.Number(marked) != 1213 {
		t.Fatalf("Mark changed the error: %v", marked)
	}
	other := &mysql.MySQLError{Number: 1064}
	if mysqlerr.Mark(other) != error(other) || mysqlerr.Mark(nil) != nil {
		t.Fatal("Mark wrapped a non-retryable error")
	}
}
