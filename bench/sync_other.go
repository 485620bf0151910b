//go:build !linux

package bench

import "os"

// fdatasync falls back to fsync where the system has no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }

// probeDir returns dataDir: without a portable device check the probe's
// file goes into the data directory itself.
func probeDir(dataDir string) string { return dataDir }
