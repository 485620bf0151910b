//go:build race

package etcd_test

// raceEnabled: the race detector slows the gRPC client several times over.
const raceEnabled = true
