-- Drops concurkit's rate-limit state: every key starts again with its full
-- quota.
DROP TABLE IF EXISTS concurkit_ratelimit_gcra;
DROP TABLE IF EXISTS concurkit_ratelimit_windows;
