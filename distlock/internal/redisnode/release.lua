-- Compare-and-delete: delete the lock only if it still holds our value, so
-- an expired holder never deletes its successor's lock.
--   KEYS[1] lock key   ARGV[1] lock value
-- Returns 1 (deleted) or 0 (not ours any more).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
