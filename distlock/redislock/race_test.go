//go:build race

package redislock_test

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
