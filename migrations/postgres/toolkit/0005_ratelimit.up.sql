-- concurkit's rate-limit state (ratelimit/ratelimitpg), toolkit set.
-- IF NOT EXISTS: a schema that already has these tables adopts them.
--
-- UNLOGGED: rate-limit counts are soft state, like Redis without
-- persistence. A decision then commits without waiting for a WAL flush (a
-- logged table caps a hot key at the server's fsync rate, ~400/s on one
-- disk); the price is that a crash of the server empties the tables (each
-- key gets its quota again, once) and that standbys do not have them (after
-- a failover the counts start empty). ALTER TABLE … SET LOGGED if you need
-- them to survive. fillfactor 70 leaves room on each page so that the
-- updates every request makes stay HOT (no index entry to write).

-- Fixed-window counters (ratelimit.FixedWindow): one row per key.
CREATE UNLOGGED TABLE IF NOT EXISTS concurkit_ratelimit_windows (
    "key"        text        PRIMARY KEY,
    "window_end" timestamptz NOT NULL,
    "used"       bigint      NOT NULL
) WITH (fillfactor = 70);

-- GCRA theoretical arrival times (ratelimit.GCRA): one row per key.
CREATE UNLOGGED TABLE IF NOT EXISTS concurkit_ratelimit_gcra (
    "key" text        PRIMARY KEY,
    "tat" timestamptz NOT NULL
) WITH (fillfactor = 70);
