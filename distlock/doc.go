// Package distlock defines the contract shared by concurkit's distributed
// lock backends (subpackages redis, redlock, zookeeper, etcd, dynamodb and
// postgres): a Locker hands out Leases, and every Lease carries a
// monotonic fencing token that the package fenced checks in storage.
//
// A lock with a time-to-live alone cannot guarantee mutual exclusion: a
// process paused by garbage collection, a slow network or a clock jump can
// outlive its lease and write after another holder took over. The fencing
// token closes that gap: storage accepts a write only with a token at least
// as high as any it has seen.
package distlock
