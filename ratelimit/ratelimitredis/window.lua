-- Fixed window: check and count in one atomic step, so that concurrent
-- callers never admit more than the limit and a denied call is not counted.
--   KEYS[1]  the key's counter, a hash: e = window end, c = count used
--   ARGV[1]  end of the caller's window (µs since the Unix epoch, aligned)
--   ARGV[2]  limit per window        ARGV[3] cost n
--   ARGV[4]  TTL in ms, set only when a window starts (a new key or a
--            newer window): it reclaims memory; the stored window end,
--            not the TTL, decides when a window is over.
-- The window end is the caller's, passed in (not TIME), so tests can move
-- the clock; a caller whose clock lags counts into the newer window it
-- finds, never back into an older one.
-- Returns {allowed (1 or 0), count used, window end}.
-- Times stay below 2^53 µs (checked by the caller): exact in Lua numbers.
local e = tonumber(ARGV[1])
local n = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'e', 'c')
local se = tonumber(state[1])
if not se or se < e then
  redis.call('HSET', KEYS[1], 'e', ARGV[1], 'c', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {1, n, e}
end
local c = tonumber(state[2]) or 0
if c + n > tonumber(ARGV[2]) then
  return {0, c, se}
end
return {1, redis.call('HINCRBY', KEYS[1], 'c', n), se}
