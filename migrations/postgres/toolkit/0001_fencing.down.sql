ALTER TABLE counters  DROP COLUMN IF EXISTS max_seen_token;
ALTER TABLE inventory DROP COLUMN IF EXISTS max_seen_token;
DROP SEQUENCE IF EXISTS concurkit_lock_token_seq;
DROP SEQUENCE IF EXISTS concurkit_fence_token_seq;
DROP TABLE IF EXISTS concurkit_fences;
