-- Example tables used by concurkit's tests, demo and benchmarks (InnoDB).
-- There is deliberately no CHECK (stock >= 0): the concurrency strategy, not
-- a constraint, must keep stock from going negative.
CREATE TABLE IF NOT EXISTS inventory (
    id      BIGINT PRIMARY KEY,
    sku     VARCHAR(64) NOT NULL,
    stock   INT NOT NULL,
    version BIGINT NOT NULL DEFAULT 1
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS counters (
    id      BIGINT PRIMARY KEY,
    value   BIGINT NOT NULL DEFAULT 0,
    version BIGINT NOT NULL DEFAULT 1
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS jobs (
    id         BIGINT AUTO_INCREMENT PRIMARY KEY,
    payload    TEXT NOT NULL,
    state      VARCHAR(16) NOT NULL DEFAULT 'pending',
    claimed_by VARCHAR(64),
    claimed_at DATETIME(6),
    KEY jobs_state_idx (state, id)
) ENGINE=InnoDB;
