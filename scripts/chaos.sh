#!/usr/bin/env bash
# The long chaos runs behind `make chaos`: every workload on every backend it
# has, safe and unsafe (the negative control: the first minutes of the same
# seed's fault plan), every nemesis that applies — scripts/services.sh's
# servers frozen and killed too, so run it on a machine where nothing else
# uses them (a killed PostgreSQL or MariaDB restarts with crash recovery).
# Each run's summary goes to chaos/results/<name>.txt; its
# history, faults and report to $CHAOS_OUT/<name>/ (not committed).
#
# Environment: CHAOS_DURATION (default 60s; the counter's safe runs
# CHAOS_COUNTER_DURATION, default 250s: ≥100 client pauses and ≥10,000
# fenced writes; ZooKeeper's and etcd's CHAOS_SLOW_DURATION, 420–600s),
# CHAOS_UNSAFE_DURATION (default 60s), CHAOS_TTL (500ms), CHAOS_SEED (1),
# CHAOS_ONLY (a regular expression on run names, e.g. '^counter-'),
# CHAOS_OUT (default a temporary directory).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
duration=${CHAOS_DURATION:-60s} counter_duration=${CHAOS_COUNTER_DURATION:-250s}
unsafe_duration=${CHAOS_UNSAFE_DURATION:-60s} ttl=${CHAOS_TTL:-500ms} seed=${CHAOS_SEED:-1}
only=${CHAOS_ONLY:-.}
out=${CHAOS_OUT:-$(mktemp -d)}
bin=$out/concurkit
go build -o "$bin" ./cmd/concurkit
# A killed PostgreSQL or MariaDB must keep what it acknowledged: the durable
# profile (services.sh's default, fast, has synchronous_commit=off and
# innodb_flush_log_at_trx_commit=0, which lose the last commits when the
# server process dies). The next `services.sh up` puts the fast one back.
scripts/services.sh up --profile durable pg mariadb
mkdir -p chaos/results
state=${CONCURKIT_STATE:-/tmp/concurkit}/run
status=0

# servers NAME...: flags for scripts/services.sh's servers. A killed server
# is run again as it ran (NAME=PIDFILE@ADDR: same command line, its data
# kept — a crash and a restart); Redis rewrites its process title, so it
# comes back through services.sh up (empty, as a Redis without persistence
# does anyway; the tokens come from PostgreSQL); DynamoDB Local (in memory,
# but for register-dynamodb) and RabbitMQ (a node with its own epmd) are
# only frozen.
servers() {
	local n addr
	for n in "$@"; do
		addr=$(scripts/services.sh status 2>/dev/null | awk -v n="$n" '$1 == n' | grep -o '127\.0\.0\.1:[0-9]*' | head -1)
		case $n in
		redis* | redlock*) printf -- '--server %s=%s/%s.pid ' "$n" "$state" "$n" ;;
		dynamodb | rabbitmq) printf -- '--pause-server %s=%s/%s.pid ' "$n" "$state" "$n" ;;
		*) printf -- '--server %s=%s/%s.pid@%s ' "$n" "$state" "$n" "$addr" ;;
		esac
	done
}

# run NAME DURATION FLAGS...: one run; an INVALID verdict fails the script
# unless NAME ends in -unsafe, where it is the point.
run() {
	local name=$1 d=$2 rc=0
	shift 2
	[[ $name =~ $only ]] || return 0
	echo "== $name"
	"$bin" chaos --duration "$d" --ttl "$ttl" --seed "$seed" --out "$out/$name" "$@" >"$out/$name.log" 2>&1 || rc=$?
	grep -v '^ *[0-9.]*s ' "$out/$name.log" || true
	if [[ -f $out/$name/summary.txt ]]; then
		cp "$out/$name/summary.txt" "chaos/results/$name.txt"
	fi
	case "$name:$rc" in
	*-unsafe:1 | *:0) ;;
	*) status=1 ;;
	esac
}

# both NAME DURATION FLAGS...: the safe run, then the negative control.
both() {
	local name=$1 d=$2
	shift 2
	run "$name" "$d" "$@"
	run "$name-unsafe" "$unsafe_duration" "$@" --unsafe
}

declare -A lockservers=([redis]=redis [redlock]="redlock1 redlock2 redlock3 redlock4 redlock5"
	[zookeeper]=zk [etcd]=etcd [dynamodb]=dynamodb [postgres]=)
# Short leases and faults close together: ≥100 client pauses in the run.
# A pause lasts 1–3× the TTL, so the TTL must be near the lease the server
# enforces: ZooKeeper stretches a session timeout to 2 ticks (1 s with
# services.sh's tickTime) — with a 300 ms TTL no pause would outlive a
# session and the negative control could find nothing; etcd stretches a
# lease to 2 s (its default timing), so 1–3 s pauses outlive about half.
# ZooKeeper and etcd grant fewer leases a second: longer runs there, to pass
# 10,000 fenced writes (and, with etcd's 1 s leases, 100 pauses).
declare -A slow=([zookeeper]=${CHAOS_SLOW_DURATION:-600s} [etcd]=${CHAOS_SLOW_DURATION:-540s})
for b in redis redlock zookeeper etcd dynamodb postgres; do
	timing=(--ttl 300ms --interval 300ms)
	[[ $b == etcd || $b == zookeeper ]] && timing=(--ttl 1s)
	# shellcheck disable=SC2046 # one flag per word
	both "counter-$b" "${slow[$b]:-$counter_duration}" --workload counter --backend "$b" --workers 8 --options keys=4 "${timing[@]}" \
		$(servers pg ${lockservers[$b]})
done

# The lock recipes (chaos/results/recipes): 16 candidates of one election,
# or 16 clients on 3 permits, paused and killed, faults every 500 ms.
for b in redis redlock zookeeper etcd dynamodb postgres; do
	both "election-$b" "$duration" --workload election --backend "$b" --workers 16 --ttl 1s --interval 500ms \
		--nemesis pause,kill --options think=50ms
	both "semaphore-$b" "$duration" --workload semaphore --backend "$b" --workers 16 --ttl 1s \
		--nemesis pause,kill --options think=50ms,keys=3
done

# The clusters, members frozen and killed (the leader among them, a third
# of the time).
CONCURKIT_ETCD_ENDPOINT=$CONCURKIT_ETCD_CLUSTER both counter-etcd-cluster "${CHAOS_SLOW_DURATION:-600s}" \
	--workload counter --backend etcd --workers 8 --options keys=4 --ttl 1s $(servers pg etcd1 etcd2 etcd3)
CONCURKIT_ZK_ADDR=$CONCURKIT_ZK_ENSEMBLE both counter-zookeeper-ensemble "${CHAOS_SLOW_DURATION:-420s}" \
	--workload counter --backend zookeeper --workers 8 --options keys=4 --ttl 1s $(servers pg zk1 zk2 zk3)

# go-redis bounding each command by its context's deadline.
both counter-redis-cto "$counter_duration" --workload counter --backend redis --workers 8 \
	--options keys=4,redis_context_timeout=true --ttl 300ms --interval 300ms $(servers pg redis)

both register-postgres "$duration" --workload register --backend postgres $(servers pg)
both register-mysql "$duration" --workload register --backend mysql $(servers mariadb)
both register-mysql-rc "$duration" --workload register --backend mysql --options isolation=read-committed $(servers mariadb)
both register-mysql-sa "$duration" --workload register --backend mysql --options sql_mode=SIMULTANEOUS_ASSIGNMENT $(servers mariadb)
both register-mysql-sa-rc "$duration" --workload register --backend mysql \
	--options sql_mode=SIMULTANEOUS_ASSIGNMENT,isolation=read-committed $(servers mariadb)
both register-postgres-rr "$duration" --workload register --backend postgres --options isolation=repeatable-read $(servers pg)

# Kills rather than pauses: a killed server process mid-request is what
# the middleware's lock timeout is for.
idem=(--workload idempotent --nemesis kill,latency,reset,drop,freeze,terminate,server-pause,server-kill)
both idempotent-postgres 120s "${idem[@]}" --backend postgres $(servers pg)
both idempotent-mysql-sa 120s "${idem[@]}" --backend mysql --options sql_mode=SIMULTANEOUS_ASSIGNMENT $(servers mariadb)
both idempotent-dynamodb 120s "${idem[@]}" --backend dynamodb --nemesis kill,latency,reset,drop,freeze,server-pause,server-kill \
	$(servers dynamodb)

# Redis frozen, not killed: this Redis keeps nothing on disk, and a limiter
# whose store forgets its counts admits a window's quota again — a loss
# ratelimit's doc states, not a defect the run should report.
both ratelimit-redis "$duration" --workload ratelimit --backend redis --pause-server "redis=$state/redis.pid"
# PostgreSQL too: the limiter's tables are unlogged, so a crash forgets the
# counts (ratelimit's doc says so); a killed one admitted a window's quota
# twice.
both ratelimit-postgres "$duration" --workload ratelimit --backend postgres --pause-server "pg=$state/pg.pid"
both messages-nats "$duration" --workload messages --backend nats $(servers pg nats)
both messages-amqp "$duration" --workload messages --backend amqp $(servers pg rabbitmq)
both saga-postgres "$duration" --workload saga --backend postgres $(servers pg)
both saga-mysql-sa "$duration" --workload saga --backend mysql --options sql_mode=SIMULTANEOUS_ASSIGNMENT $(servers mariadb)

# DynamoDB Local on disk (services.sh's durable profile) for the run that
# kills and restarts it — in memory it would come back empty — and back in
# memory after it.
if [[ register-dynamodb =~ $only ]]; then
	scripts/services.sh up --profile durable dynamodb
	addr=$(scripts/services.sh status dynamodb | grep -o '127\.0\.0\.1:[0-9]*' | head -1)
	both register-dynamodb "$duration" --workload register --backend dynamodb --server "dynamodb=$state/dynamodb.pid@$addr"
	scripts/services.sh up --profile fast dynamodb
fi

echo "histories, faults and reports: $out"
exit $status
