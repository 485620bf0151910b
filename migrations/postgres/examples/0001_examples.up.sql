-- Example tables used by concurkit's tests, demo and benchmarks (examples
-- set, history table concurkit_examples_schema_migrations). A service
-- adopting concurkit does not need them: migrations.Up never creates them.
-- There is deliberately no CHECK (stock >= 0): the concurrency strategy, not
-- a constraint, must keep stock from going negative.

-- inventory: one row per item; version is the optimistic-locking column,
-- max_seen_token the fencing column (existing rows accept any valid token).
CREATE TABLE IF NOT EXISTS inventory (
    id             bigint  PRIMARY KEY,
    sku            text    NOT NULL,
    stock          integer NOT NULL,
    version        bigint  NOT NULL DEFAULT 1,
    max_seen_token bigint  NOT NULL DEFAULT 0
);

-- counters: the lost-update workload.
CREATE TABLE IF NOT EXISTS counters (
    id             bigint PRIMARY KEY,
    value          bigint NOT NULL DEFAULT 0,
    version        bigint NOT NULL DEFAULT 1,
    max_seen_token bigint NOT NULL DEFAULT 0
);

-- jobs: the SKIP LOCKED queue-worker pattern.
CREATE TABLE IF NOT EXISTS jobs (
    id         bigserial PRIMARY KEY,
    payload    text NOT NULL,
    state      text NOT NULL DEFAULT 'pending',
    claimed_by text,
    claimed_at timestamptz
);
CREATE INDEX IF NOT EXISTS jobs_pending_idx ON jobs (id) WHERE state = 'pending';
