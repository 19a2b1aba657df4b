/**
 * The shared token budget inside Redis: its key layout, its Lua scripts and how their arguments
 * and replies are encoded. The scripts are the Redis twin of state.ts: RESERVE is `canReserve`,
 * SETTLE is `settle` (observe, then the verdict), READ returns the numbers as they stand.
 * test/integration/pool-parity.test.ts runs the scripts and state.ts over one table of cases, so
 * a change to one that is not made to the other fails there.
 *
 * Every script works in one rate-limit resource (rate-limit.ts), given as an argument: a token has a
 * window per resource, and its pause and death hold in all of them.
 *
 * Keys share the hash tag {pool}, so every script stays in one Cluster slot:
 *   <prefix>{pool}:t:<name>  hash: <resource>:limit, <resource>:remaining, <resource>:reset,
 *                            <resource>:known per resource; paused (epoch ms); dead (epoch ms
 *                            until which the token is dead: the flag expires, see DEAD_FLAG_TTL_MS);
 *                            unlimited (1: no rate limit applies, every resource; state.ts)
 *   <prefix>{pool}:r:<name>  zset: reservation "<resource>|<id>" -> expiry (epoch ms); their count
 *                            is the per-token concurrency, those of one resource hold its quota
 *   <prefix>{pool}:p:<kind>:<name>  zset: the points log of a budget (rest, graphql): "<points>|<id>" -> epoch ms
 *   <prefix>{pool}:replicas  zset: replica id -> heartbeat expiry (epoch ms)
 * A missing field reads as the placeholder of an unseen token (UNSEEN); a `dead` at or before now
 * reads as alive.
 */
import { fallbackReset, RESET_GRACE_MS, UNSEEN, type Settlement } from '../rules/state.js';
import type { Resource } from '../rules/rate-limit.js';
import { backgroundReserve, burstBudget, BURST_WINDOW_MS, chargeOf, LOG_SPAN_MS } from '../rules/choose.js';
import type { TokenNumbers, PaceKind } from '../rules/types.js';

export interface BudgetKeys {
  /** The token's numbers (hash). */
  token(name: string): string;
  /** The token's points log in a budget (zset: "<points>|<id>" -> epoch ms). */
  points(name: string, kind: PaceKind): string;
  /** The token's live reservations (zset: id -> expiry). */
  reservations(name: string): string;
  /** Live replicas (zset: id -> heartbeat expiry). */
  readonly replicas: string;
}

export function budgetKeys(prefix: string): BudgetKeys {
  const base = `${prefix}{pool}:`;
  return {
    token: (name) => `${base}t:${name}`,
    points: (name, kind) => `${base}p:${kind}:${name}`,
    reservations: (name) => `${base}r:${name}`,
    replicas: `${base}replicas`,
  };
}

/** The reservation member of a request in a resource: the resource first, so scripts count a resource's. */
export function reservationId(resource: Resource, id: string): string {
  return `${resource}|${id}`;
}

const bit = (b: boolean): number => (b ? 1 : 0);

/**
 * The Lua `state(ok, key, reservations, resource, now)` every script answers with: the flag, the
 * token's numbers in the resource, its reservations in the resource, then all its reservations.
 */
const STATE = `
local function numbers(key, r, now)
  local h = redis.call('HMGET', key, r .. ':limit', r .. ':remaining', r .. ':reset', 'paused', 'dead', r .. ':known', 'unlimited')
  local dead = 0
  if (tonumber(h[5]) or 0) > now then dead = 1 end
  return {tonumber(h[1]) or ${UNSEEN.limit}, tonumber(h[2]) or ${UNSEEN.remaining}, tonumber(h[3]) or ${UNSEEN.reset},
    tonumber(h[4]) or ${UNSEEN.pausedUntil}, dead, tonumber(h[6]) or ${bit(UNSEEN.known)}, tonumber(h[7]) or ${bit(UNSEEN.unlimited)}}
end
local function held(reservations, r)
  local all = redis.call('ZRANGE', reservations, 0, -1)
  local p = r .. '|'
  local mine = 0
  for _, id in ipairs(all) do
    if string.sub(id, 1, #p) == p then mine = mine + 1 end
  end
  return mine, #all
end
local function state(ok, key, reservations, r, now)
  local n = numbers(key, r, now)
  local mine, all = held(reservations, r)
  return {ok, n[1], n[2], n[3], n[4], n[5], n[6], mine, all, n[7]}
end
`;

/**
 * choose.ts's `paceReadyAt` over a points log (zset: "<points>|<id>" -> epoch ms): `ready(log,
 * points, limit, window, now)` is the earliest time the points fit under the limit in the window.
 */
const PACE = `
local function ready(log, points, limit, window, now)
  local from = now - window
  local at, cost = {}, {}
  local sum = 0
  for i = 1, #log, 2 do
    local t = tonumber(log[i + 1])
    if t > from then
      table.insert(at, t)
      table.insert(cost, tonumber(string.match(log[i], '^([%d.]+)|')))
      sum = sum + cost[#cost]
    end
  end
  if sum + points <= limit then return now end
  for i = 1, #at do
    sum = sum - cost[i]
    if sum + points <= limit then return at[i] + window end
  end
  return now + window
end
`;

/**
 * Reserves one unit of a resource when state.ts's `canReserve` allows it, after dropping expired
 * reservations: the quota counts the resource's reservations (an unlimited token has no quota to
 * count), the per-token cap all of them. With pacing (a third key and ARGV 7 on), the token's
 * points log must also take the request's points (choose.ts); when it cannot, the reply's 11th
 * field is when it will (epoch ms), else 0.
 * KEYS: token hash, reservations[, points log of the budget]. ARGV: now (ms), member, expiry (ms),
 * per-token cap, reset grace (ms), resource[, points, minute limit, burst limit, minute window
 * (ms), burst window (ms)] (paceArgs).
 */
export const RESERVE = `${STATE}${PACE}
local now = tonumber(ARGV[1])
local r = ARGV[6]
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local s = state(0, KEYS[1], KEYS[2], r, now)
s[11] = 0
local limit, remaining, reset, paused, dead, mine, all, unlimited = s[2], s[3], s[4], s[5], s[6], s[8], s[9], s[10]
if dead == 1 or paused > now then return s end
local left = remaining
if now >= reset * 1000 + tonumber(ARGV[5]) then left = limit end
if all >= tonumber(ARGV[4]) or (unlimited ~= 1 and left - mine <= 0) then return s end
local points = tonumber(ARGV[7] or '0')
if KEYS[3] and points > 0 then
  local minute, burst = tonumber(ARGV[10]), tonumber(ARGV[11])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - minute)
  local log = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
  local at = math.max(ready(log, points, tonumber(ARGV[8]), minute, now), ready(log, points, tonumber(ARGV[9]), burst, now))
  if at > now then
    s[11] = at
    return s
  end
  redis.call('ZADD', KEYS[3], now, points .. '|' .. ARGV[2])
  redis.call('PEXPIRE', KEYS[3], minute + 1000)
end
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]), ARGV[2])
s[1] = 1
s[8] = mine + 1
s[9] = all + 1
return s
`;

/**
 * Drops the reservation, then applies state.ts's `settle` in the settlement's resource: observe
 * the answer's numbers (which end `unlimited`), then its verdict. KEYS: token hash, reservations.
 * ARGV: member ('' for none), has observation (0/1), limit, remaining, reset, verdict (ok,
 * unauthorized, dead, alive, unlimited, exhausted, secondary), the upstream's reset for an
 * exhaustion (0 for none), pause until (ms), now (ms), the no-reset fallback (epoch s), resource,
 * dead until (ms), numberless (0/1: an ok answer without any rate-limit header).
 */
export const SETTLE = `${STATE}
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[2], ARGV[1]) end
local now = tonumber(ARGV[9])
local r = ARGV[11]
local n = numbers(KEYS[1], r, now)
local remaining, reset, paused, known = n[2], n[3], n[4], n[6]
if ARGV[2] == '1' then
  local olimit, oremaining, oreset = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  if known == 0 or oreset > reset then
    redis.call('HSET', KEYS[1], r .. ':limit', olimit, r .. ':remaining', oremaining, r .. ':reset', oreset, r .. ':known', 1)
    reset = oreset
  elseif oreset == reset then
    redis.call('HSET', KEYS[1], r .. ':limit', olimit, r .. ':remaining', math.min(remaining, oremaining))
  end
  redis.call('HSET', KEYS[1], 'unlimited', 0)
  known = 1
end
local v = ARGV[6]
if v == 'ok' then
  if ARGV[13] == '1' and known == 0 then redis.call('HSET', KEYS[1], 'unlimited', 1) end
elseif v == 'dead' then
  redis.call('HSET', KEYS[1], 'dead', tonumber(ARGV[12]))
elseif v == 'alive' then
  redis.call('HSET', KEYS[1], 'dead', 0)
elseif v == 'unlimited' then
  redis.call('HSET', KEYS[1], 'dead', 0, 'unlimited', 1)
elseif v == 'exhausted' then
  local until_ = math.max(reset, tonumber(ARGV[7]))
  if until_ * 1000 <= now then until_ = tonumber(ARGV[10]) end
  redis.call('HSET', KEYS[1], r .. ':remaining', 0, r .. ':reset', until_, r .. ':known', 1, 'unlimited', 0)
elseif v == 'secondary' then
  redis.call('HSET', KEYS[1], 'paused', math.max(paused, tonumber(ARGV[8])))
end
return state(1, KEYS[1], KEYS[2], r, now)
`;

/**
 * KEYS: token hash and reservations of every token. ARGV: now (ms), then resources. Each token's
 * state (flag 1) in each resource, token by token, flattened.
 */
export const READ = `${STATE}
local now = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS, 2 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i + 1], '-inf', now)
  for j = 2, #ARGV do
    for _, v in ipairs(state(1, KEYS[i], KEYS[i + 1], ARGV[j], now)) do
      table.insert(out, v)
    end
  end
end
return out
`;

/** KEYS: replicas. ARGV: now, id, expiry. Returns live replicas. */
export const HEARTBEAT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]))
redis.call('ZADD', KEYS[1], tonumber(ARGV[3]), ARGV[2])
return redis.call('ZCARD', KEYS[1])
`;

/**
 * Reply of RESERVE and SETTLE (and of each token and resource in READ): ok flag, the token's
 * numbers in the resource, its reservations in the resource, all its reservations, and whether no
 * rate limit applies to it.
 */
export type Reply = [
  ok: number,
  limit: number,
  remaining: number,
  reset: number,
  paused: number,
  dead: number,
  known: number,
  reserved: number,
  reservedAll: number,
  unlimited: number,
];
export const REPLY_LENGTH = 10;

/** A reply as the pool reads it. */
export interface SharedState {
  /** RESERVE: the reservation was added. */
  readonly granted: boolean;
  readonly numbers: TokenNumbers;
  /** Live reservations on the token in the resource, every replica's (they hold its quota). */
  readonly reserved: number;
  /** Live reservations on the token over every resource (they hold its concurrency). */
  readonly reservedAll: number;
  /** RESERVE refused for want of points: when they are back (epoch ms); 0 otherwise. */
  readonly paceReady: number;
}

export function decodeReply(reply: readonly number[]): SharedState {
  const [ok, limit, remaining, reset, paused, dead, known, reserved, reservedAll, unlimited] = reply as Reply;
  const paceReady = reply[REPLY_LENGTH] ?? 0;
  return {
    granted: ok === 1,
    numbers: { limit, remaining, reset, pausedUntil: paused, dead: dead === 1, known: known === 1, unlimited: unlimited === 1 },
    reserved,
    reservedAll,
    paceReady,
  };
}

/** ARGV of RESERVE (`member` from `reservationId`). */
export function reserveArgs(
  nowMs: number,
  member: string,
  expiryMs: number,
  perTokenCap: number,
  resource: Resource = 'core',
): Array<string | number> {
  return [nowMs, member, expiryMs, perTokenCap, RESET_GRACE_MS, resource];
}

/**
 * The pacing ARGV of RESERVE after reserveArgs' (none without pacing): the request's charge, the
 * limits of both windows (background work leaves the reserve) and their lengths.
 */
export function paceArgs(points: number, perMinute: number | undefined, background: boolean): Array<string | number> {
  if (perMinute === undefined) return [];
  const burst = burstBudget(perMinute);
  return [
    chargeOf(points, perMinute),
    background ? perMinute - backgroundReserve(perMinute) : perMinute,
    background ? burst - backgroundReserve(burst) : burst,
    LOG_SPAN_MS,
    BURST_WINDOW_MS,
  ];
}

/** ARGV of SETTLE for a settlement (state.ts) of reservation `member` ('' when nothing was reserved). */
export function settleArgs(member: string, settlement: Settlement, nowMs: number): Array<string | number> {
  const observed =
    settlement.observation !== undefined && settlement.observation.resource === settlement.resource ? settlement.observation : undefined;
  return [
    member,
    observed === undefined ? '0' : '1',
    observed?.limit ?? 0,
    observed?.remaining ?? 0,
    observed?.reset ?? 0,
    settlement.verdict,
    settlement.exhaustedReset ?? 0,
    settlement.pauseUntil,
    nowMs,
    fallbackReset(nowMs),
    settlement.resource,
    settlement.deadUntil,
    settlement.numberless ? '1' : '0',
  ];
}

/** ARGV of READ: the time, then the resources to read for every token. */
export function readArgs(nowMs: number, resources: readonly Resource[]): Array<string | number> {
  return [nowMs, ...resources];
}

/**
 * A token's numbers in a resource as the fields of its hash (what the scripts write); a dead
 * token is written dead until `deadUntil` (epoch ms).
 */
export function hashOf(numbers: TokenNumbers, resource: Resource = 'core', deadUntil = Number.MAX_SAFE_INTEGER): Record<string, number> {
  return {
    [`${resource}:limit`]: numbers.limit,
    [`${resource}:remaining`]: numbers.remaining,
    [`${resource}:reset`]: numbers.reset,
    [`${resource}:known`]: bit(numbers.known),
    paused: numbers.pausedUntil,
    dead: numbers.dead ? deadUntil : 0,
    unlimited: bit(numbers.unlimited),
  };
}
