package bench

import (
	"os"
	"path/filepath"
	"syscall"
)

// fdatasync flushes f's data (not its metadata when only data changed),
// the call PostgreSQL's default wal_sync_method uses.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// probeDir returns the directory for the disk probe's file: dataDir's
// parent when it is on the same file system (the probe stays out of the
// server's own directory), else dataDir itself.
func probeDir(dataDir string) string {
	parent := filepath.Dir(filepath.Clean(dataDir))
	var a, b syscall.Stat_t
	if syscall.Stat(dataDir, &a) == nil && syscall.Stat(parent, &b) == nil && a.Dev == b.Dev {
		if syscall.Access(parent, 2 /* W_OK */) == nil {
			return parent
		}
	}
	return dataDir
}
