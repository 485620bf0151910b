-- concurkit's idempotency keys (package idempotency, store idempotencymysql):
-- one row per (principal, key), holding the request's fingerprint, the lock
-- of the run in progress, the recovery point reached and, once finished,
-- the stored response. Toolkit set; nothing here touches a table of yours.
-- IF NOT EXISTS: a database that already has the table adopts it.
-- Keys, principals and recovery points are VARBINARY: compared byte for
-- byte, never case-insensitively by a collation. Times are UTC.
CREATE TABLE IF NOT EXISTS concurkit_idempotency_keys (
    principal        VARBINARY(255) NOT NULL,
    idempotency_key  VARBINARY(255) NOT NULL,
    fingerprint      VARBINARY(64)  NOT NULL,             -- SHA-256 of the request
    lock_id          BIGINT         NOT NULL,             -- random id of the last claim; fences its writes
    attempts         BIGINT         NOT NULL DEFAULT 1,   -- runs since the key was created
    locked_at        DATETIME(6)    NULL,                 -- NULL when no run holds the key
    recovery_point   VARBINARY(255) NOT NULL DEFAULT 'started', -- 'started', a phase name, 'finished'
    response_status  INT            NULL,
    response_headers JSON           NULL,
    response_body    LONGBLOB       NULL,
    created_at       DATETIME(6)    NOT NULL,
    last_run_at      DATETIME(6)    NOT NULL,
    expires_at       DATETIME(6)    NOT NULL,
    PRIMARY KEY (principal, idempotency_key),
    -- The reaper deletes expired keys in batches, oldest first.
    KEY concurkit_idempotency_keys_expires_at_idx (expires_at)
) ENGINE=InnoDB;
