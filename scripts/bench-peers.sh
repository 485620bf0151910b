#!/usr/bin/env bash
# scripts/bench-peers.sh [OUT_DIR] — concurkit side by side with the lock
# libraries and hand-written SQL people use today (bench/peers_test.go):
# every pair interleaved in one run, COUNT repetitions of PEERS_TIME each,
# then benchstat's table (medians with 95% confidence intervals, ratios
# against the peer) per pair.
#
#   COUNT       repetitions (default 10; benchstat wants >= 6 for intervals)
#   PEERS_TIME  duration of one repetition of one pair (default 1s)
#   PEERS       -bench regexp under BenchmarkPeers (default: every pair)
#   CPUPROFILE  if set, also write a CPU profile there (go tool pprof -top)
#
# Needs the servers of scripts/services.sh (it loads their endpoints).
# benchstat comes from the Go module proxy, pinned below.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
COUNT=${COUNT:-10}
PEERS_TIME=${PEERS_TIME:-1s}
PEERS=${PEERS:-.}
out=${1:-bench-results/peers-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
eval "$(scripts/services.sh env)"
prof=()
if [[ -n ${CPUPROFILE:-} ]]; then prof=(-cpuprofile "$CPUPROFILE"); fi
# -benchtime 1x: each sub-benchmark only reports what the interleaved
# repetitions measured (see runPeers).
go test ./bench -run '^$' -bench "^BenchmarkPeers/($PEERS)" -benchtime 1x \
	-count "$COUNT" -timeout 30m "${prof[@]}" -args -peers.time "$PEERS_TIME" | tee "$out/peers.txt"
go run "golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION" -col /impl "$out/peers.txt" | tee "$out/peers-benchstat.txt"
echo "wrote $out/peers.txt and $out/peers-benchstat.txt" >&2
