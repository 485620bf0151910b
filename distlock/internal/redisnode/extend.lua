-- Compare-and-pexpire: renew the lock only if it still holds our value,
-- and keep the fence record alive for at least the fence TTL, so that it
-- outlives the lock however long the lock is held: a fence record that
-- expired under a held lock would let a waiter whose token was minted
-- before the holder's acquire after it with a lower token.
--   KEYS[1] lock key   KEYS[2] fence key
--   ARGV[1] lock value   ARGV[2] TTL in milliseconds
--   ARGV[3] fence key TTL in milliseconds (> lock TTL)
-- Returns 1 (renewed) or 0 (not ours any more).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then
  if redis.call('PEXPIRE', KEYS[2], ARGV[3]) == 0 then
    -- The record was lost (a server restart without persistence, keys
    -- written by an older version): while we hold the lock nobody
    -- acquired after us, so our token (the value's prefix) is the highest.
    redis.call('SET', KEYS[2], string.match(ARGV[1], '^[^:]*'), 'PX', ARGV[3])
  end
end
return 1
