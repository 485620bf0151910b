-- Take the lock only if it is free and the caller's fencing token is not
-- lower than the highest token that ever acquired this key.
--   KEYS[1] lock key          KEYS[2] fence key (highest token that acquired)
--   ARGV[1] lock value        ARGV[2] lock TTL in milliseconds
--   ARGV[3] token (decimal)   ARGV[4] fence key TTL in milliseconds
-- Returns 1 (acquired), 0 (held by another holder) or -1 (stale token: a
-- holder with a higher token already acquired; mint a new one).
-- Tokens are compared as decimal strings (length, then bytes) so int64
-- values above 2^53 keep their order; Lua numbers are doubles.
local seen = redis.call('GET', KEYS[2])
if seen and (#seen > #ARGV[3] or (#seen == #ARGV[3] and seen > ARGV[3])) then
  return -1
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return 1
