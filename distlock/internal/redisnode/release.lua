-- Compare-and-delete: delete the lock only if it still holds our value, so
-- an expired holder never deletes its successor's lock.
--   KEYS[1] lock key   KEYS[2] fence key   ARGV[1] lock value
-- Returns 1 (deleted), 2 (already gone, and nobody acquired the key since:
-- the fence record still holds our token), 3 (the server has neither the
-- lock nor a fence record: it lost its data, a restart without
-- persistence or a flush; nobody can have acquired the key there since
-- without leaving a fence) or 0 (not ours any more).
--
-- 2 makes the call idempotent: a client that retries it after the server
-- applied it (go-redis does after a read timeout) finds the key gone. That
-- it was our own delete cannot be told from an expiry or an operator's
-- DEL, but in none of these cases did anyone hold the lock after us, which
-- is what a lost lease means; a key held by another value, or a fence
-- record that moved on (another holder acquired and released since, or
-- a cleanup retired our token), is 0.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
if v then
  return 0
end
local f = redis.call('GET', KEYS[2])
if f == string.match(ARGV[1], '^[^:]*') then
  return 2
end
if not f then
  return 3
end
return 0
