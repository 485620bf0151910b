package deadlock

import "time"

// Time is the simulator's logical clock, in logical microseconds.
type Time int64

// Units of logical time.
const (
	Microsecond Time = 1
	Millisecond Time = 1000
	Second      Time = 1000000
)

// String formats t like a time.Duration ("1.5ms").
func (t Time) String() string { return (time.Duration(t) * time.Microsecond).String() }
