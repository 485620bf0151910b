# concurkit — build, test and benchmark against real servers on loopback.
#
#   make services   start every test server (scripts/services.sh up, fast profile,
#                   and the replicated profile: Galera, PostgreSQL standbys)
#   make test       services, go vet, gofmt, go test -race, short fuzz runs
#   make bench      servers with durable settings, then the contention benchmark
#                   (default grid, ~4 min; results in bench-results/<timestamp>/)
#   make bench-full the full grid (about an hour; what bench/results/ holds)
#   make bench-galera the full grid on MariaDB only: the single server durable, then the
#                   3-node Galera cluster against it (--baseline); ~1.5 h; results in
#                   bench/results/galera/ and bench/results/galera/single/
#   make bench-peers concurkit's locks and helpers vs the libraries people use
#                   (interleaved, benchstat confidence intervals; ~4 min)
#   make chaos      the long fault-injection runs (every workload and backend, safe
#                   and unsafe, servers frozen and killed: run it alone; ~1.5 h;
#                   summaries in chaos/results/)
#   make status     which servers are up
#   make down       stop the servers started by scripts/services.sh
#   make unit | fuzz | vet | fmt-check    single phases of `make test`
#
# Works from a fresh clone with only Go installed: scripts/services.sh installs
# the servers (apt, npm) on first use. Every phase prints its duration.

SHELL := /usr/bin/env
.SHELLFLAGS := bash -euo pipefail -c

GO           ?= go
SERVICES     := scripts/services.sh
TIMED        := scripts/timed.sh
TEST_TIMEOUT ?= 12m
# Extra `go test` flags. -count=1 by default: the tests talk to servers whose
# state the test cache cannot see, so a cached "ok" would prove nothing.
# `make test TESTFLAGS=` allows cached results.
TESTFLAGS    ?= -count=1
# An execution count, not a duration: with a duration, Go 1.26's fuzz
# coordinator can report a spurious "context deadline exceeded" failure at
# the boundary on a loaded machine (golang/go#75804, fixed in Go 1.27).
FUZZTIME     ?= 10000x
# Fuzz targets run by `make test`, as pkg/path:FuzzName (space separated):
# everything that builds SQL from caller-supplied names or parses input.
FUZZ         ?= internal/ident:FuzzPostgres internal/ident:FuzzMySQL \
                internal/redact:FuzzDSN migrations:FuzzTemplate \
                optimistic/internal/cas:FuzzCacheKey \
                optimistic/optimisticpg:FuzzPostgresStatement optimistic/optimisticmysql:FuzzMySQLStatement \
                upsert/upsertpg:FuzzPostgresStatements upsert/upsertmysql:FuzzMySQLStatements \
                pessimistic/pessimisticpg:FuzzLockClause pessimistic/pessimisticpg:FuzzClaimSQL \
                pessimistic/pessimisticmysql:FuzzLockClause pessimistic/pessimisticmysql:FuzzClaimSQL \
                fenced/fencedpg:FuzzGuardSQL fenced/fencedmysql:FuzzGuardSQL \
                outbox:FuzzValidate \
                deadlock:FuzzLockManager deadlock:FuzzSimulate \
                ratelimit/internal/spec:FuzzModel idempotency:FuzzParseKey \
                idempotency:FuzzRequestFingerprint idempotency/internal/wire:FuzzHeader \
                hotrow:FuzzFits bench:FuzzParseSLO

# Load the servers' endpoints (CONCURKIT_*) into the recipe's shell.
WITH_ENV := eval "$$($(SERVICES) env)";

.PHONY: services status test vet fmt-check unit fuzz bench bench-full bench-galera bench-peers chaos down

services:
	@$(TIMED) "services up" $(SERVICES) up --profile fast
	@$(TIMED) "replicated up" $(SERVICES) up --profile replicated

FMT_CHECK := out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# Every listed target must exist; then two run at a time (FUZZ_JOBS): a
# short run is mostly its instrumented build and link, which leave a core
# idle.
FUZZ_JOBS    ?= 2
FUZZ_RUN := for f in $(FUZZ); do \
		pkg=$${f%%:*}; name=$${f\#\#*:}; \
		grep -qs "^func $$name(" ./$$pkg/*_test.go || { echo "FUZZ: no $$name in ./$$pkg"; exit 1; }; \
	done; \
	printf '%s\n' $(FUZZ) | xargs -P $(FUZZ_JOBS) -I{} bash -c 'f={}; pkg=$${f%%:*}; name=$${f\#\#*:}; \
		exec $(TIMED) "fuzz $$pkg $$name" $(GO) test -run="^$$" -fuzz="^$${name}$$" -fuzztime=$(FUZZTIME) ./$$pkg'

test: services
	@$(WITH_ENV) \
	$(TIMED) "go vet" $(GO) vet ./...; \
	$(TIMED) "gofmt -l" bash -c '$(FMT_CHECK)'; \
	$(TIMED) "go test -race" $(GO) test -race -timeout $(TEST_TIMEOUT) $(TESTFLAGS) ./...; \
	$(FUZZ_RUN)

vet:
	@$(GO) vet ./...

fmt-check:
	@$(FMT_CHECK)

unit: services
	@$(WITH_ENV) $(GO) test -race -timeout $(TEST_TIMEOUT) $(TESTFLAGS) ./...

fuzz: services
	@$(WITH_ENV) $(FUZZ_RUN)

BENCHFLAGS ?=

bench:
	@$(TIMED) "services up (durable)" $(SERVICES) up --profile durable
	@$(WITH_ENV) $(TIMED) "concurkit bench" $(GO) run ./cmd/concurkit bench $(BENCHFLAGS)

bench-peers:
	@$(TIMED) "services up" $(SERVICES) up --profile fast
	@$(WITH_ENV) $(TIMED) "bench-peers" scripts/bench-peers.sh $(OUT)

bench-full:
	@$(TIMED) "services up (durable)" $(SERVICES) up --profile durable
	@$(WITH_ENV) $(TIMED) "concurkit bench --grid full" $(GO) run ./cmd/concurkit bench --grid full --out bench/results $(BENCHFLAGS)

# The same grid twice, MariaDB only: the single server first, then the Galera cluster's
# three nodes (one DSN each, clients spread over them) compared with it cell by cell.
bench-galera:
	@$(TIMED) "services up (durable)" $(SERVICES) up --profile durable mariadb redis etcd
	@$(TIMED) "replicated up" $(SERVICES) up --profile replicated galera1 galera2 galera3
	@$(WITH_ENV) $(TIMED) "concurkit bench --grid full (single MariaDB)" $(GO) run ./cmd/concurkit bench --db mariadb --grid full \
		--out bench/results/galera/single $(BENCHFLAGS)
	@$(WITH_ENV) $(TIMED) "concurkit bench --grid full (Galera)" $(GO) run ./cmd/concurkit bench --db mariadb --grid full \
		--mysql-dsn "$${CONCURKIT_GALERA_DSNS:?no Galera cluster}" --baseline bench/results/galera/single/summary.json --out bench/results/galera $(BENCHFLAGS)

chaos: services
	@$(WITH_ENV) $(TIMED) "chaos" scripts/chaos.sh

status:
	@$(SERVICES) status

down:
	@$(SERVICES) down
	@$(SERVICES) down --profile replicated
