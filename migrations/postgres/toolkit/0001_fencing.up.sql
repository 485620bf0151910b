-- concurkit's own objects for fencing (toolkit set, history table
-- concurkit_schema_migrations). Nothing here touches a table of yours.
-- IF NOT EXISTS: a schema that already has these objects (created by hand,
-- by fencedpg.CreateSequence, or by an older concurkit release) adopts them.

-- Fence rows of fencedpg.Admit: resource -> highest token admitted.
CREATE TABLE IF NOT EXISTS concurkit_fences (
    resource       text   PRIMARY KEY,
    max_seen_token bigint NOT NULL DEFAULT 0
);
-- Token source for locks that cannot mint tokens themselves
-- (distlock/redislock, distlock/redlock): fencedpg.Sequence.
CREATE SEQUENCE IF NOT EXISTS concurkit_fence_token_seq AS bigint MINVALUE 1;
-- Token sequence of distlock/pglock (the locker also creates it on first use).
CREATE SEQUENCE IF NOT EXISTS concurkit_lock_token_seq AS bigint MINVALUE 1;
