/**
 * The shared token budget inside Redis: its key layout, its Lua scripts and how their arguments
 * and replies are encoded. The scripts are the Redis twin of state.ts: RESERVE is `canReserve`,
 * SETTLE is `settle` (observe, then the verdict), READ returns the numbers as they stand.
 * test/integration/pool-parity.test.ts runs the scripts and state.ts over one table of cases, so
 * a change to one that is not made to the other fails there.
 *
 * Keys share the hash tag {pool}, so every script stays in one Cluster slot:
 *   <prefix>{pool}:t:<name>  hash: limit remaining reset paused dead known (a TokenNumbers)
 *   <prefix>{pool}:r:<name>  zset: reservation id -> expiry (epoch ms)
 *   <prefix>{pool}:replicas  zset: replica id -> heartbeat expiry (epoch ms)
 * A missing field reads as the placeholder of an unseen token (UNSEEN).
 */
import { fallbackReset, RESET_GRACE_MS, UNSEEN, type Settlement } from './state.js';
import type { TokenNumbers } from './types.js';

export interface BudgetKeys {
  /** The token's numbers (hash). */
  token(name: string): string;
  /** The token's live reservations (zset: id -> expiry). */
  reservations(name: string): string;
  /** Live replicas (zset: id -> heartbeat expiry). */
  readonly replicas: string;
}

export function budgetKeys(prefix: string): BudgetKeys {
  const base = `${prefix}{pool}:`;
  return { token: (name) => `${base}t:${name}`, reservations: (name) => `${base}r:${name}`, replicas: `${base}replicas` };
}

const bit = (b: boolean): number => (b ? 1 : 0);

/** The Lua `state(ok)` every script answers with: the flag, the token's numbers, then its reservation count. */
const STATE = `
local function numbers(key)
  local h = redis.call('HMGET', key, 'limit', 'remaining', 'reset', 'paused', 'dead', 'known')
  return {tonumber(h[1]) or ${UNSEEN.limit}, tonumber(h[2]) or ${UNSEEN.remaining}, tonumber(h[3]) or ${UNSEEN.reset},
    tonumber(h[4]) or ${UNSEEN.pausedUntil}, tonumber(h[5]) or ${bit(UNSEEN.dead)}, tonumber(h[6]) or ${bit(UNSEEN.known)}}
end
local function state(ok, key, reservations)
  local n = numbers(key)
  return {ok, n[1], n[2], n[3], n[4], n[5], n[6], redis.call('ZCARD', reservations)}
end
`;

/**
 * Reserves one unit when state.ts's `canReserve` allows it, after dropping expired reservations.
 * KEYS: token hash, reservations. ARGV: now (ms), id, expiry (ms), per-token cap, reset grace (ms).
 */
export const RESERVE = `${STATE}
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local s = state(0, KEYS[1], KEYS[2])
local limit, remaining, reset, paused, dead, reserved = s[2], s[3], s[4], s[5], s[6], s[8]
if dead == 1 or paused > now then return s end
local left = remaining
if now >= reset * 1000 + tonumber(ARGV[5]) then left = limit end
if reserved >= tonumber(ARGV[4]) or left - reserved <= 0 then return s end
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]), ARGV[2])
s[1] = 1
s[8] = reserved + 1
return s
`;

/**
 * Drops the reservation, then applies state.ts's `settle`: observe the answer's numbers, then its
 * verdict. KEYS: token hash, reservations. ARGV: id ('' for none), has observation (0/1), limit,
 * remaining, reset, verdict (ok, dead, exhausted, secondary), the upstream's reset for an
 * exhaustion (0 for none), pause until (ms), now (ms), the no-reset fallback (epoch s).
 */
export const SETTLE = `${STATE}
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[2], ARGV[1]) end
local n = numbers(KEYS[1])
local remaining, reset, paused, known = n[2], n[3], n[4], n[6]
if ARGV[2] == '1' then
  local olimit, oremaining, oreset = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  if known == 0 or oreset > reset then
    redis.call('HSET', KEYS[1], 'limit', olimit, 'remaining', oremaining, 'reset', oreset, 'known', 1)
    reset = oreset
  elseif oreset == reset then
    redis.call('HSET', KEYS[1], 'limit', olimit, 'remaining', math.min(remaining, oremaining))
  end
end
local v = ARGV[6]
if v == 'dead' then
  redis.call('HSET', KEYS[1], 'dead', 1)
elseif v == 'exhausted' then
  local now = tonumber(ARGV[9])
  local until_ = math.max(reset, tonumber(ARGV[7]))
  if until_ * 1000 <= now then until_ = tonumber(ARGV[10]) end
  redis.call('HSET', KEYS[1], 'remaining', 0, 'reset', until_, 'known', 1)
elseif v == 'secondary' then
  redis.call('HSET', KEYS[1], 'paused', math.max(paused, tonumber(ARGV[8])))
end
return state(1, KEYS[1], KEYS[2])
`;

/** KEYS: token hash and reservations of every token. ARGV: now (ms). Each token's state (flag 1), flattened. */
export const READ = `${STATE}
local out = {}
for i = 1, #KEYS, 2 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i + 1], '-inf', tonumber(ARGV[1]))
  for _, v in ipairs(state(1, KEYS[i], KEYS[i + 1])) do
    table.insert(out, v)
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

/** Reply of RESERVE and SETTLE (and of each token in READ): ok flag, the token's numbers, its reservations. */
export type Reply = [
  ok: number,
  limit: number,
  remaining: number,
  reset: number,
  paused: number,
  dead: number,
  known: number,
  reserved: number,
];
export const REPLY_LENGTH = 8;

/** A reply as the pool reads it. */
export interface SharedState {
  /** RESERVE: the reservation was added. */
  readonly granted: boolean;
  readonly numbers: TokenNumbers;
  /** Live reservations on the token, every replica's. */
  readonly reserved: number;
}

export function decodeReply(reply: readonly number[]): SharedState {
  const [ok, limit, remaining, reset, paused, dead, known, reserved] = reply as Reply;
  return { granted: ok === 1, numbers: { limit, remaining, reset, pausedUntil: paused, dead: dead === 1, known: known === 1 }, reserved };
}

/** ARGV of RESERVE. */
export function reserveArgs(nowMs: number, id: string, expiryMs: number, perTokenCap: number): Array<string | number> {
  return [nowMs, id, expiryMs, perTokenCap, RESET_GRACE_MS];
}

/** ARGV of SETTLE for a settlement (state.ts) of reservation `id` ('' when nothing was reserved). */
export function settleArgs(id: string, settlement: Settlement, nowMs: number): Array<string | number> {
  const observed = settlement.observation !== undefined && settlement.observation.resource === 'core' ? settlement.observation : undefined;
  return [
    id,
    observed === undefined ? '0' : '1',
    observed?.limit ?? 0,
    observed?.remaining ?? 0,
    observed?.reset ?? 0,
    settlement.verdict,
    settlement.exhaustedReset ?? 0,
    settlement.pauseUntil,
    nowMs,
    fallbackReset(nowMs),
  ];
}

/** A token's numbers as the fields of its hash (what the scripts write). */
export function hashOf(numbers: TokenNumbers): Record<string, number> {
  return {
    limit: numbers.limit,
    remaining: numbers.remaining,
    reset: numbers.reset,
    paused: numbers.pausedUntil,
    dead: bit(numbers.dead),
    known: bit(numbers.known),
  };
}
