-- Saga instances of package saga (sagapg.Store): one row per instance key,
-- rewritten at every step, each write conditional on the runner's claim.
-- IF NOT EXISTS: a schema that already has the table adopts it. Inputs
-- and steps are json, not jsonb: kept as written, and \u0000 (which jsonb
-- refuses) is valid in them.
CREATE TABLE IF NOT EXISTS concurkit_sagas (
    saga_key           text        PRIMARY KEY,
    definition         text        NOT NULL,             -- name of the definition that started it
    definition_version integer     NOT NULL,
    input              json        NOT NULL,             -- the input given to Run, as Run encoded it
    input_hash         bytea       NOT NULL,             -- SHA-256 of the input's JSON as Run encoded it
    status             text        NOT NULL,             -- running, completed, compensating, compensated
    steps              json        NOT NULL,             -- [{name, status, attempts, result, error}]
    last_error         text        NOT NULL DEFAULT '',
    claim              bigint      NOT NULL,             -- the lease holder's claim: the fencing token of every write
    lease_until        timestamptz,                      -- NULL: no runner holds it
    revision           bigint      NOT NULL DEFAULT 1,   -- +1 per write
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL
);
-- Recovery scans (sagapg.Store.Unfinished): unfinished instances by lease.
CREATE INDEX IF NOT EXISTS concurkit_sagas_unfinished ON concurkit_sagas (lease_until)
    WHERE status IN ('running', 'compensating');
