-- concurkit's own objects for fencing (toolkit set, history table
-- concurkit_schema_migrations). Nothing here touches a table of yours.
-- IF NOT EXISTS: a database that already has these objects (created by hand,
-- by fencedmysql.CreateSequence, or by an older concurkit release) adopts them.

-- Fence rows of fencedmysql.Admit: resource -> highest token admitted.
CREATE TABLE IF NOT EXISTS concurkit_fences (
    resource       VARCHAR(255) NOT NULL PRIMARY KEY,
    max_seen_token BIGINT       NOT NULL DEFAULT 0
) ENGINE=InnoDB;
-- Token source for distlock/redislock and distlock/redlock
-- (fencedmysql.Sequence). MariaDB 10.3+ only: the /*M!100300 ... */
-- executable comment runs on MariaDB and is an ordinary comment on MySQL 8,
-- which has no SEQUENCE objects, so this migration applies on both. A
-- sequence is shared by all connections, so NEXTVAL stays strictly
-- increasing in call order. NOCACHE: a MariaDB Galera cluster refuses a
-- sequence with a cache (and fencedmysql.Sequence refuses to draw tokens
-- there, where each node's copy hands out the same values).
/*M!100300 CREATE SEQUENCE IF NOT EXISTS concurkit_fence_token_seq START WITH 1 MINVALUE 1 INCREMENT BY 1 NOCACHE */;
