-- concurkit's idempotency keys (package idempotency, store idempotencypg):
-- one row per (principal, key), holding the request's fingerprint, the lock
-- of the run in progress, the recovery point reached and, once finished,
-- the stored response. Toolkit set; nothing here touches a table of yours.
-- IF NOT EXISTS: a schema that already has the table adopts it.
CREATE TABLE IF NOT EXISTS concurkit_idempotency_keys (
    principal        text        NOT NULL,
    idempotency_key  text        NOT NULL,
    fingerprint      bytea       NOT NULL,             -- SHA-256 of the request
    lock_id          bigint      NOT NULL,             -- random id of the last claim; fences its writes
    attempts         bigint      NOT NULL DEFAULT 1,   -- runs since the key was created
    locked_at        timestamptz,                      -- NULL when no run holds the key
    recovery_point   text        NOT NULL DEFAULT 'started', -- 'started', a phase name, 'finished'
    response_status  integer,
    response_headers jsonb,
    response_body    bytea,
    created_at       timestamptz NOT NULL,
    last_run_at      timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    PRIMARY KEY (principal, idempotency_key)
);
-- The reaper deletes expired keys in batches, oldest first.
CREATE INDEX IF NOT EXISTS concurkit_idempotency_keys_expires_at_idx ON concurkit_idempotency_keys (expires_at);
