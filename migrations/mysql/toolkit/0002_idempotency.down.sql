-- Drops the idempotency keys with every stored response: retries of
-- requests already processed will run again.
DROP TABLE IF EXISTS concurkit_idempotency_keys;
