package mysqltime_test

import (
	"testing"
	"time"
	_ "time/tzdata" // the zone below loads on a machine without tz data too

	"github.com/concurkit/concurkit/internal/mysqltime"
)

// TestRoundTrip: what Text binds scans back to the same instant, whether
// the driver hands the column over as text or as a time.Time in some
// other loc (the stored wall clock read in that location).
func TestRoundTrip(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 3, 4, 5, 123456000, ny)
	text := mysqltime.Text(at)
	if text != "2026-12-02 08:04:05.123456" {
		t.Fatalf("Text = %q", text)
	}
	stored, _ := time.ParseInLocation(mysqltime.Layout, text, time.UTC)
	for name, v := range map[string]any{
		"text":             text,
		"bytes":            []byte(text),
		"parseTime in NY":  time.Date(stored.Year(), stored.Month(), stored.Day(), stored.Hour(), stored.Minute(), stored.Second(), stored.Nanosecond(), ny),
		"parseTime in UTC": stored,
	} {
		var d mysqltime.Time
		if err := d.Scan(v); err != nil || !d.Valid || !d.T.Equal(at) {
			t.Errorf("%s: Scan = %v valid %v err %v, want %v", name, d.T, d.Valid, err, at)
		}
	}
	var d mysqltime.Time
	if err := d.Scan(nil); err != nil || d.Valid || !d.T.IsZero() {
		t.Errorf("Scan(nil) = %v %v %v", d.T, d.Valid, err)
	}
	if err := d.Scan(42); err == nil {
		t.Error("Scan(42) accepted")
	}
}
