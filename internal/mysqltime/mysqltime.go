// Package mysqltime binds and reads MySQL/MariaDB DATETIME(6) values as
// the text of the UTC wall clock, so that they never depend on a DSN.
//
// go-sql-driver/mysql converts a time.Time argument to the wall clock of
// the DSN's loc, and reads a DATETIME back either as text (parseTime=false,
// which cannot tell that wall clock from UTC) or as a time.Time in loc.
// Two processes with different loc settings, or one that reads with
// parseTime=false what another wrote, would then disagree by the offset:
// an expiry read hours early or late. Text is stored as written, whatever
// the DSN: Text binds, Time scans.
package mysqltime

import (
	"fmt"
	"time"
)

// Layout is the DATETIME(6) text form of Text.
const Layout = "2006-01-02 15:04:05.000000"

// Text is t as DATETIME(6) text of its UTC wall clock: bind it instead of
// t.
func Text(t time.Time) string { return t.UTC().Format(Layout) }

// Time scans a DATETIME column written by Text, whatever the DSN's
// parseTime and loc; NULL scans as the zero time with Valid false.
type Time struct {
	T     time.Time
	Valid bool
}

// Scan implements sql.Scanner.
func (d *Time) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		d.T, d.Valid = time.Time{}, false
		return nil
	case time.Time:
		// parseTime=true: the driver read the stored wall clock in the
		// DSN's loc; that wall clock is UTC (Text).
		d.T = time.Date(v.Year(), v.Month(), v.Day(), v.Hour(), v.Minute(), v.Second(), v.Nanosecond(), time.UTC)
		d.Valid = true
		return nil
	case []byte:
		return d.parse(string(v))
	case string:
		return d.parse(v)
	}
	return fmt.Errorf("mysqltime: cannot scan %T as a time", v)
}

func (d *Time) parse(s string) error {
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", s, time.UTC)
	if err != nil {
		return fmt.Errorf("mysqltime: %w", err)
	}
	d.T, d.Valid = t, true
	return nil
}
