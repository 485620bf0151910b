-- Compare-and-pexpire: renew the lock only if it still holds our value.
--   KEYS[1] lock key   ARGV[1] lock value   ARGV[2] TTL in milliseconds
-- Returns 1 (renewed) or 0 (not ours any more).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
