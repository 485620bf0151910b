-- GCRA (generic cell rate algorithm): one theoretical arrival time (TAT)
-- per key, checked and advanced in one atomic step.
--   KEYS[1]  the key's TAT (µs since the Unix epoch, decimal)
--   ARGV[1]  now, the caller's clock (µs), passed in rather than TIME so
--            tests can move the clock
--   ARGV[2]  increment n·T (µs)   ARGV[3] tolerance τ = burst·T (µs)
--   ARGV[4]  how long the key outlives its TAT (ms)
-- A call is admitted if max(TAT, now) + n·T ≤ now + τ; then the TAT
-- becomes that sum. Exactly burst calls of cost 1 pass at once.
-- Returns {1, new TAT} when admitted, {0, max(TAT, now)} when not.
-- Times stay below 2^53 µs (checked by the caller): exact in Lua numbers.
local now = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
local new = tat + tonumber(ARGV[2])
if new - now > tonumber(ARGV[3]) then
  return {0, tat}
end
redis.call('SET', KEYS[1], string.format('%d', new), 'PX', math.ceil((new - now) / 1000) + tonumber(ARGV[4]))
return {1, new}
