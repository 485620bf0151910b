-- Saga instances of package saga (sagamysql.Store): one row per instance
-- key, rewritten at every step, each write conditional on the runner's
-- claim. IF NOT EXISTS: a database that already has the table adopts it.
-- The key is VARBINARY so that keys compare byte for byte (no collation
-- folds case or trailing spaces); times are UTC.
CREATE TABLE IF NOT EXISTS concurkit_sagas (
    saga_key           VARBINARY(255) NOT NULL PRIMARY KEY,
    definition         VARCHAR(255)   NOT NULL,
    definition_version INT            NOT NULL,
    input              LONGTEXT       NOT NULL,  -- JSON: the input given to Run
    input_hash         BINARY(32)     NOT NULL,  -- SHA-256 of the input's JSON as Run encoded it
    status             VARCHAR(16)    NOT NULL,  -- running, completed, compensating, compensated
    steps              LONGTEXT       NOT NULL,  -- JSON: [{name, status, attempts, result, error}]
    last_error         TEXT           NOT NULL,
    claim              BIGINT         NOT NULL,  -- the lease holder's claim: the fencing token of every write
    lease_until        DATETIME(6)    NULL,      -- NULL: no runner holds it
    revision           BIGINT         NOT NULL DEFAULT 1,
    created_at         DATETIME(6)    NOT NULL,
    updated_at         DATETIME(6)    NOT NULL,
    KEY concurkit_sagas_unfinished (status, lease_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
