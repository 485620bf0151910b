-- Fencing (package fenced, distlock).
-- concurkit_fences: the fence rows of fenced.Admit (resource → highest token seen).
CREATE TABLE IF NOT EXISTS concurkit_fences (
    resource       text   PRIMARY KEY,
    max_seen_token bigint NOT NULL DEFAULT 0
);
-- Token source for locks that cannot mint tokens themselves (distlock/redis, distlock/redlock).
CREATE SEQUENCE IF NOT EXISTS concurkit_fence_token_seq AS bigint MINVALUE 1;
-- Token sequence of distlock/postgres (the locker also creates it on first use).
CREATE SEQUENCE IF NOT EXISTS concurkit_lock_token_seq AS bigint MINVALUE 1;
-- Guarded writes on the example tables. Existing rows accept any positive token.
ALTER TABLE inventory ADD COLUMN IF NOT EXISTS max_seen_token bigint NOT NULL DEFAULT 0;
ALTER TABLE counters  ADD COLUMN IF NOT EXISTS max_seen_token bigint NOT NULL DEFAULT 0;
