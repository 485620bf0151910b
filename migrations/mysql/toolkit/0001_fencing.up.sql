-- Fencing (package fenced, distlock). MariaDB 10.3+ (sequences).
-- concurkit_fences: the fence rows of fenced.AdmitMySQL (resource → highest token seen).
CREATE TABLE IF NOT EXISTS concurkit_fences (
    resource       VARCHAR(255) NOT NULL PRIMARY KEY,
    max_seen_token BIGINT       NOT NULL DEFAULT 0
) ENGINE=InnoDB;
-- Token source for distlock/redis and distlock/redlock (fenced.NewMySQLSequence).
-- The sequence cache lives in the server, shared by all connections, so
-- NEXTVAL stays strictly increasing in call order.
CREATE SEQUENCE IF NOT EXISTS concurkit_fence_token_seq START WITH 1 MINVALUE 1 INCREMENT BY 1;
-- Guarded writes on the example tables. Existing rows accept any positive token.
ALTER TABLE inventory ADD COLUMN IF NOT EXISTS max_seen_token BIGINT NOT NULL DEFAULT 0;
ALTER TABLE counters  ADD COLUMN IF NOT EXISTS max_seen_token BIGINT NOT NULL DEFAULT 0;
