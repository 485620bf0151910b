-- Example tables used by concurkit's tests, demo and benchmarks (examples
-- set, history table concurkit_examples_schema_migrations). A service
-- adopting concurkit does not need them: migrations.Up never creates them.
-- There is deliberately no CHECK (stock >= 0): the concurrency strategy, not
-- a constraint, must keep stock from going negative.

-- inventory: one row per item; version is the optimistic-locking column,
-- max_seen_token the fencing column (existing rows accept any valid token).
CREATE TABLE IF NOT EXISTS inventory (
    id             BIGINT PRIMARY KEY,
    sku            VARCHAR(64) NOT NULL,
    stock          INT NOT NULL,
    version        BIGINT NOT NULL DEFAULT 1,
    max_seen_token BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB;

-- counters: the lost-update workload.
CREATE TABLE IF NOT EXISTS counters (
    id             BIGINT PRIMARY KEY,
    value          BIGINT NOT NULL DEFAULT 0,
    version        BIGINT NOT NULL DEFAULT 1,
    max_seen_token BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB;

-- jobs: the SKIP LOCKED queue-worker pattern.
CREATE TABLE IF NOT EXISTS jobs (
    id         BIGINT AUTO_INCREMENT PRIMARY KEY,
    payload    TEXT NOT NULL,
    state      VARCHAR(16) NOT NULL DEFAULT 'pending',
    claimed_by VARCHAR(64),
    claimed_at DATETIME(6),
    KEY jobs_state_idx (state, id)
) ENGINE=InnoDB;
