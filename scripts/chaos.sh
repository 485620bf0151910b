#!/usr/bin/env bash
# The long chaos runs behind `make chaos`: every counter backend with
# fencing on and off (the negative control), the same seed for both, and
# the register, idempotent and ratelimit workloads on every backend they
# have, safe and unsafe. Every nemesis applies, the servers of
# scripts/services.sh frozen and killed too: run it on a machine where
# nothing else uses them. Each run's
# summary goes to chaos/results/<workload>-<backend>[-unsafe].txt (its
# history, faults and report to $CHAOS_OUT/<name>/, not committed).
# Environment: CHAOS_DURATION (default 120s), CHAOS_TTL (500ms),
# CHAOS_SEED (1), CHAOS_COUNTER, CHAOS_REGISTER, CHAOS_IDEMPOTENT and
# CHAOS_RATELIMIT (backend lists),
# CHAOS_OUT (default a temporary directory).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
duration=${CHAOS_DURATION:-120s} ttl=${CHAOS_TTL:-500ms} seed=${CHAOS_SEED:-1}
counter=${CHAOS_COUNTER:-redis redlock zookeeper etcd dynamodb postgres}
register=${CHAOS_REGISTER:-postgres mysql dynamodb}
idempotent=${CHAOS_IDEMPOTENT:-postgres mysql dynamodb}
ratelimit=${CHAOS_RATELIMIT:-redis postgres}
out=${CHAOS_OUT:-$(mktemp -d)}
bin=$out/concurkit
go build -o "$bin" ./cmd/concurkit
mkdir -p chaos/results
status=0
state=${CONCURKIT_STATE:-/tmp/concurkit}/run
# servers NAME...: --server flags for scripts/services.sh's servers, which the
# nemesis may then freeze and kill (restarting them with services.sh up).
servers() {
	local n
	for n in "$@"; do printf -- '--server %s=%s/%s.pid ' "$n" "$state" "$n"; done
}
declare -A lockservers=([redis]=redis [redlock]="redlock1 redlock2 redlock3 redlock4 redlock5"
	[zookeeper]=zk [etcd]=etcd [dynamodb]=dynamodb [postgres]=)
declare -A dbservers=([postgres]=pg [mysql]=mariadb [dynamodb]=dynamodb [redis]=redis)
run() { # name, then concurkit chaos flags; an INVALID verdict is expected for -unsafe
	local name=$1 rc=0; shift
	echo "== $name"
	"$bin" chaos --duration "$duration" --ttl "$ttl" --seed "$seed" --out "$out/$name" "$@" >"$out/$name.log" 2>&1 || rc=$?
	tail -n +1 "$out/$name.log" | grep -v '^ *[0-9.]*s ' || true
	if [[ -f $out/$name/summary.txt ]]; then
		cp "$out/$name/summary.txt" "chaos/results/$name.txt"
	fi
	case "$name:$rc" in
	*-unsafe:1 | *-unsafe:0 | *:0) ;;
	*) status=1 ;;
	esac
}
for b in $counter; do
	# shellcheck disable=SC2046 # one flag per word
	set -- $(servers pg ${lockservers[$b]})
	run "counter-$b" --workload counter --backend "$b" "$@"
	run "counter-$b-unsafe" --workload counter --backend "$b" --unsafe "$@"
done
for w in register idempotent ratelimit; do
	for b in ${!w}; do
		# shellcheck disable=SC2046
		set -- $(servers ${dbservers[$b]})
		run "$w-$b" --workload "$w" --backend "$b" "$@"
		run "$w-$b-unsafe" --workload "$w" --backend "$b" --unsafe "$@"
	done
done
echo "histories, faults and reports: $out"
exit $status
