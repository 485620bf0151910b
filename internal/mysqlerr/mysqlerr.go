// Package mysqlerr classifies go-sql-driver/mysql server errors into the
// classes of internal/sqlerr. It is the only internal package besides the
// MySQL adapters that imports the driver, so that the PostgreSQL and
// DynamoDB paths never link it.
package mysqlerr

import (
	"errors"

	"github.com/go-sql-driver/mysql"

	"github.com/concurkit/concurkit/internal/sqlerr"
)

// Number returns the MySQL/MariaDB server error number in err's chain, or 0.
func Number(err error) uint16 {
	var e *mysql.MySQLError
	if errors.As(err, &e) {
		return e.Number
	}
	return 0
}

// Classify returns the class of the MySQL/MariaDB server error in err's
// chain, or sqlerr.Unknown.
func Classify(err error) sqlerr.Class { return sqlerr.ClassifyMySQL(Number(err)) }

// Retryable reports whether err is a MySQL/MariaDB deadlock (1213) or a
// MariaDB snapshot-isolation write conflict (1020): the server rolled the
// transaction back and running it again may succeed.
func Retryable(err error) bool { return Classify(err).Retryable() }

// Mark returns err unchanged unless it is a retryable MySQL/MariaDB error
// (see Retryable); then it returns err wrapped in an error whose
// Retryable() method reports true, so that retry.IsRetryable, which imports
// no driver, recognises it. The wrapper adds nothing to the message and
// unwraps to err.
func Mark(err error) error {
	if err == nil || !Retryable(err) {
		return err
	}
	return retryable{err}
}

type retryable struct{ error }

func (r retryable) Unwrap() error { return r.error }
func (retryable) Retryable() bool { return true }
