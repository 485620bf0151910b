-- Retire an acquisition whose outcome is unknown (its request failed or
-- was given up on, and may still be queued in the server): delete the
-- lock if it holds the acquisition's value, and raise the fence record
-- above the acquisition's token, so that its SET, should it run after
-- this script, is refused as stale. The order in which the two run on the
-- server then does not matter: one answer to this script is a confirmed
-- cleanup, even when a compare-and-delete could have run before the SET.
-- Raising the fence record only makes it stricter: a token at or below
-- the retired one is refused (its holder mints a fresh one), every later
-- token passes.
--   KEYS[1] lock key   KEYS[2] fence key
--   ARGV[1] lock value   ARGV[2] the retired token plus one (decimal)
--   ARGV[3] fence key TTL in milliseconds
-- Returns 1 if it deleted the lock, else 0.
local function lower(a, b)
  return #a < #b or (#a == #b and a < b)
end
local deleted = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  deleted = redis.call('DEL', KEYS[1])
end
local seen = redis.call('GET', KEYS[2])
if not seen or lower(seen, ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', math.max(redis.call('PTTL', KEYS[2]), tonumber(ARGV[3])))
end
return deleted
