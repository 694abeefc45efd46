/**
 * GCRA (the generic cell rate algorithm, as ATM's policers and redis-cell have it), once in TypeScript for the
 * local backend and once in Lua for Redis: the two must stay the same formula, so they sit side by side.
 *
 * A counter holds one number, its TAT (theoretical arrival time): when it would be empty again if calls kept
 * coming at the steady rate. With `interval` = windowMs / limit and `span` = burst × interval, a call at `now`
 * moves the TAT to max(TAT, now) + interval, and is allowed when that is at most now + span. From an empty
 * counter exactly `burst` calls pass at one instant, then one more every `interval`. A refused call moves
 * nothing; it could pass after `wait` = newTat − span − now.
 *
 * Times are whole microseconds: epoch microseconds plus the longest drain the schema allows (31 days) stay far
 * below 2^53, so every sum is exact in a double, in JavaScript and in Lua alike.
 */

/** A counter's TAT once it admits one more call: a drained (or never seen) counter starts from `nowUs`. */
export function nextTat(storedUs: number | undefined, nowUs: number, intervalUs: number): number {
  return (storedUs === undefined || storedUs < nowUs ? nowUs : storedUs) + intervalUs;
}

/** How long past `nowUs` the call that would move the TAT to `nextUs` must wait; ≤ 0 means it may pass now. */
export function waitUs(nextUs: number, nowUs: number, spanUs: number): number {
  return nextUs - spanUs - nowUs;
}

/**
 * The Redis side, one round trip for every rule a call matches. KEYS: the counters; ARGV: per counter its
 * interval and span (µs). Nothing is written unless every counter admits the call (all-or-nothing, so a refusal
 * by one rule costs no other rule's budget). Each written counter expires when it would be drained, so Redis
 * holds only counters that still mean something.
 *
 * The clock is Redis's own (`TIME`): replicas whose clocks disagree still share one timeline. Reading it before a
 * write needs script effects replication, the default since Redis 5.
 *
 * Returns `{1}` when allowed, else `{0, i, wait}`: the 1-based counter with the longest wait, in µs.
 * Numbers are written with `%.0f` because Lua's `tostring` keeps only 14 digits, and epoch µs have 16.
 */
export const GCRA_LUA = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local tats = {}
local worst, worstWait = 0, 0
for i = 1, #KEYS do
  local interval = tonumber(ARGV[2 * i - 1])
  local span = tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  local nextTat = tat + interval
  local wait = nextTat - span - now
  if wait > 0 then
    if wait > worstWait then worst, worstWait = i, wait end
  else
    tats[i] = nextTat
  end
end
if worst > 0 then return {0, worst, worstWait} end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], string.format('%.0f', tats[i]), 'PX', math.ceil((tats[i] - now) / 1000))
end
return {1}
`;
