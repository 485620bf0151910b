-- Take the lock only if it is free and the caller's fencing token is not
-- lower than the highest token that ever acquired this key.
--   KEYS[1] lock key          KEYS[2] fence key (highest token that acquired)
--   ARGV[1] lock value        ARGV[2] lock TTL in milliseconds
--   ARGV[3] token (decimal)   ARGV[4] fence key TTL in milliseconds (> lock TTL)
-- Returns 1 (acquired), 0 (held by another holder) or -1 (stale token: a
-- higher token already acquired the key, or a cleanup retired this one;
-- mint a new one).
--
-- The call is idempotent: a client that retries it after the server
-- applied it (go-redis does after a read timeout) finds the lock holding
-- its own value, which is this acquisition, not a busy lock: it gets 1 and
-- the expiry reset, instead of 0 and a lock nobody holds until its TTL.
-- Checked only where the plain path fails, so it costs nothing otherwise.
--
-- Tokens are compared as decimal strings (length, then bytes) so int64
-- values above 2^53 keep their order; Lua numbers are doubles.
local function lower(a, b)
  return #a < #b or (#a == #b and a < b)
end
-- ours renews the lock that already holds our value, and keeps the fence
-- record at our token (it can only be missing or lower if it was lost)
-- for at least the fence TTL.
local function ours()
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local seen = redis.call('GET', KEYS[2])
  if not seen or lower(seen, ARGV[3]) then
    redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
  elseif redis.call('PTTL', KEYS[2]) < tonumber(ARGV[4]) then
    redis.call('PEXPIRE', KEYS[2], ARGV[4])
  end
  return 1
end
local seen = redis.call('GET', KEYS[2])
if seen and lower(ARGV[3], seen) then
  if redis.call('GET', KEYS[1]) == ARGV[1] then
    return ours()
  end
  return -1
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return ours()
end
return 0
