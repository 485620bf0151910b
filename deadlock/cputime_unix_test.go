//go:build unix

package deadlock_test

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time: on a shared machine it
// measures the work done, where wall time also counts waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
