/**
 * The token budget shared by replicas through Redis. Each replica keeps its in-process pool
 * (choice, queue, caps, reactions); this layer makes the pool's spending atomic across replicas:
 *
 * - reserve: before a lease is handed out, one Lua script checks the token's shared state
 *   (dead, paused, remaining minus every replica's live reservations, the per-token cap) and
 *   adds a reservation, or refuses. Two replicas can never hand out the same last unit.
 * - settle: one script drops the reservation and merges what the upstream said (the same
 *   rules as rate-limit.ts: within one window the lowest remaining wins, a later reset starts a
 *   new window; 401 kills the token, primary exhaustion zeroes it, a secondary limit pauses it).
 * - Reservations carry an expiry, so a replica that dies mid-request frees its units.
 * - A heartbeat counts live replicas (N): each takes 1/N of the whole-upstream concurrency cap.
 * - Redis unavailable: this replica keeps serving from its own pool, conservatively assuming it
 *   owns 1/N of what was left; when Redis answers again the shared numbers take over.
 *
 * Keys share the hash tag {pool}, so every script stays in one Cluster slot:
 *   <prefix>{pool}:t:<name>  hash: limit remaining reset paused dead known
 *   <prefix>{pool}:r:<name>  zset: reservation id -> expiry (ms)
 *   <prefix>{pool}:replicas  zset: replica id -> heartbeat expiry (ms)
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../log/logger.js';
import type { RedisClient, RedisConnection } from '../redis/connection.js';
import { RESET_GRACE_MS } from './choose.js';
import type { AcquireOptions, Acquired, Lease, LocalTokenPool, SharedView, TokenPool } from './pool.js';
import { readRateLimit, secondaryPauseMs, type Verdict } from './rate-limit.js';

/** Reply of both scripts: ok flag, then the token's shared numbers. */
type Reply = [ok: number, limit: number, remaining: number, reset: number, paused: number, dead: number, known: number, reserved: number];

const STATE = `
local function state(ok)
  local h = redis.call('HMGET', KEYS[1], 'limit', 'remaining', 'reset', 'paused', 'dead', 'known')
  return {ok, tonumber(h[1]) or 1, tonumber(h[2]) or 1, tonumber(h[3]) or 0, tonumber(h[4]) or 0, tonumber(h[5]) or 0, tonumber(h[6]) or 0, redis.call('ZCARD', KEYS[2])}
end
`;

/** KEYS: token hash, reservations. ARGV: now, id, expiry, per-token cap, reset grace (ms). */
const RESERVE = `${STATE}
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local s = state(0)
local limit, remaining, reset, paused, dead, known, reserved = s[2], s[3], s[4], s[5], s[6], s[7], s[8]
if dead == 1 or paused > now then return s end
local left = remaining
if known == 0 or now >= reset * 1000 + tonumber(ARGV[5]) then left = limit end
if reserved >= tonumber(ARGV[4]) or left - reserved <= 0 then return s end
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]), ARGV[2])
s[1] = 1
s[8] = reserved + 1
return s
`;

/**
 * KEYS: token hash, reservations. ARGV: id ('' for none), has observation (0/1), limit,
 * remaining, reset, verdict (ok, dead, exhausted, secondary), exhausted-until reset, pause until.
 */
const SETTLE = `${STATE}
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[2], ARGV[1]) end
local h = redis.call('HMGET', KEYS[1], 'limit', 'remaining', 'reset', 'known')
local reset, known = tonumber(h[3]) or 0, tonumber(h[4]) or 0
if ARGV[2] == '1' then
  local olimit, oremaining, oreset = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  if known == 0 or oreset > reset then
    redis.call('HSET', KEYS[1], 'limit', olimit, 'remaining', oremaining, 'reset', oreset, 'known', 1)
    reset = oreset
  elseif oreset == reset then
    local cur = tonumber(h[2]) or oremaining
    redis.call('HSET', KEYS[1], 'limit', olimit, 'remaining', math.min(cur, oremaining))
  end
end
local v = ARGV[6]
if v == 'dead' then
  redis.call('HSET', KEYS[1], 'dead', 1)
elseif v == 'exhausted' then
  redis.call('HSET', KEYS[1], 'remaining', 0, 'reset', math.max(reset, tonumber(ARGV[7])), 'known', 1)
elseif v == 'secondary' then
  local p = tonumber(redis.call('HGET', KEYS[1], 'paused') or '0') or 0
  redis.call('HSET', KEYS[1], 'paused', math.max(p, tonumber(ARGV[8])))
end
return state(1)
`;

/** KEYS: token hash and reservations of every token. ARGV: now. Each token's state, flattened. */
const READ = `
local out = {}
for i = 1, #KEYS, 2 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i + 1], '-inf', tonumber(ARGV[1]))
  local h = redis.call('HMGET', KEYS[i], 'limit', 'remaining', 'reset', 'paused', 'dead', 'known')
  for _, v in ipairs({1, tonumber(h[1]) or 1, tonumber(h[2]) or 1, tonumber(h[3]) or 0, tonumber(h[4]) or 0, tonumber(h[5]) or 0, tonumber(h[6]) or 0, redis.call('ZCARD', KEYS[i + 1])}) do
    table.insert(out, v)
  end
end
return out
`;

/** KEYS: replicas. ARGV: now, id, expiry. Returns live replicas. */
const HEARTBEAT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]))
redis.call('ZADD', KEYS[1], tonumber(ARGV[3]), ARGV[2])
return redis.call('ZCARD', KEYS[1])
`;

interface BudgetCommands {
  etagereReserve(tokenKey: string, reservationsKey: string, ...args: Array<string | number>): Promise<Reply>;
  etagereSettle(tokenKey: string, reservationsKey: string, ...args: Array<string | number>): Promise<Reply>;
  etagereHeartbeat(replicasKey: string, ...args: Array<string | number>): Promise<number>;
  etagereRead(numKeys: number, ...keysAndArgs: Array<string | number>): Promise<number[]>;
}

function define(c: RedisClient): RedisClient & BudgetCommands {
  const withCommands = c as RedisClient & Partial<BudgetCommands>;
  if (withCommands.etagereReserve === undefined) {
    c.defineCommand('etagereReserve', { numberOfKeys: 2, lua: RESERVE });
    c.defineCommand('etagereSettle', { numberOfKeys: 2, lua: SETTLE });
    c.defineCommand('etagereHeartbeat', { numberOfKeys: 1, lua: HEARTBEAT });
    c.defineCommand('etagereRead', { lua: READ });
  }
  return c as RedisClient & BudgetCommands;
}

export interface SharedBudgetSettings {
  perTokenConcurrency: number;
  maxConcurrency: number;
  /** How long a reservation lives if its replica never settles it (crash). */
  reservationMs?: number;
  heartbeatMs?: number;
  /** How long a request may wait for other replicas' reservations to come back. */
  queueTimeoutMs: number;
}

/** Pause before asking Redis again when a token's units are all reserved by other replicas. */
const BUSY_RETRY_MS = 5;

export interface SharedTokenPool extends TokenPool {
  /** True while the budget is shared through Redis; false in the local fallback. */
  shared(): boolean;
  /** Live replicas seen by the heartbeat. */
  replicas(): number;
}

export function createSharedTokenPool(local: LocalTokenPool, conn: RedisConnection, s: SharedBudgetSettings, logger: Logger): SharedTokenPool {
  const log = logger.child({ component: 'token-budget' });
  const replica = randomBytes(6).toString('base64url');
  const base = `${conn.prefix}{pool}:`;
  const tokenKey = (name: string): string => `${base}t:${name}`;
  const resKey = (name: string): string => `${base}r:${name}`;
  const reservationMs = s.reservationMs ?? 120_000;
  const heartbeatMs = s.heartbeatMs ?? 2_000;
  let seq = 0;
  let n = 1;
  let sharedMode = true;
  const repeats = new Map<string, number>();

  /** The reply as this replica's view: remaining minus other replicas' reservations. */
  const apply = (name: string, r: Reply, mine: number): void => {
    const [, limit, remaining, reset, paused, dead, known, reserved] = r;
    const view: SharedView = { limit, remaining: remaining - Math.max(0, reserved - mine), reset, pausedUntil: paused, dead: dead === 1, known: known === 1 };
    local.sync(name, view);
  };

  const fallback = (why: string): void => {
    if (!sharedMode) return;
    sharedMode = false;
    local.scaleRemaining(1 / n);
    log.warn({ replicas: n, why }, 'token budget: Redis unavailable, this replica now spends at most 1/N of what was left');
  };
  const recovered = (): void => {
    if (sharedMode) return;
    sharedMode = true;
    log.info('token budget: shared through Redis again');
  };

  /** Reads every token's shared numbers into the local view (others' spending since we last asked). */
  const refresh = async (): Promise<void> => {
    const keys = local.names.flatMap((name) => [tokenKey(name), resKey(name)]);
    const flat = await conn.run('read', (c) => define(c).etagereRead(keys.length, ...keys, Date.now()));
    if (flat === undefined) return;
    local.names.forEach((name, i) => {
      const r = flat.slice(i * 8, i * 8 + 8) as Reply;
      if (r.length === 8) apply(name, r, local.inFlight(name));
    });
  };

  const heartbeat = async (): Promise<void> => {
    const now = Date.now();
    const live = await conn.run('heartbeat', (c) => define(c).etagereHeartbeat(`${base}replicas`, now, replica, now + heartbeatMs * 3));
    if (live === undefined) {
      fallback('heartbeat failed');
      return;
    }
    n = Math.max(1, Number(live));
    local.setMaxConcurrency(Math.max(1, Math.floor(s.maxConcurrency / n)));
    await refresh();
  };
  // First beat as soon as the connection is ready (a beat before that would count as an outage).
  if (conn.client.status === 'ready') void heartbeat();
  conn.client.on('ready', () => void heartbeat());
  const timer = setInterval(() => void heartbeat(), heartbeatMs);
  timer.unref();

  const settleShared = (name: string, id: string, status: number, header: (n: string) => string | undefined, v: Verdict): void => {
    const o = readRateLimit(header);
    const core = o !== undefined && o.resource === 'core';
    const now = Date.now();
    let pauseUntil = 0;
    if (v.kind === 'secondary') {
      const k = (repeats.get(name) ?? 0) + 1;
      repeats.set(name, k);
      pauseUntil = now + secondaryPauseMs(v.retryAfterMs, k);
    } else if (v.kind === 'ok' && status < 400) {
      repeats.delete(name);
    }
    const exhaustedReset = v.kind === 'exhausted' ? (v.reset ?? Math.ceil(now / 1000) + 60) : 0;
    void conn
      .run('settle', (c) =>
        define(c).etagereSettle(
          tokenKey(name),
          resKey(name),
          id,
          core ? '1' : '0',
          core ? o.limit : 0,
          core ? o.remaining : 0,
          core ? o.reset : 0,
          v.kind,
          exhaustedReset,
          pauseUntil,
        ),
      )
      .then((r) => {
        if (r !== undefined) apply(name, r, local.inFlight(name));
      });
  };


  const wrap = (lease: Lease, id: string): Lease => ({
    name: lease.name,
    authorization: lease.authorization,
    switched: lease.switched,
    settle(status, header, body) {
      const v = lease.settle(status, header, body);
      settleShared(lease.name, id, status, header, v);
      return v;
    },
    cancel() {
      lease.cancel();
      void conn.run('release', (c) => c.zrem(resKey(lease.name), id));
    },
  });

  /** A lease from the local pool that Redis also granted (or the local one, in the fallback). */
  const acquire = async (opts: AcquireOptions = {}): Promise<Acquired> => {
    const refused = new Set(opts.exclude ?? []);
    let refreshed = false;
    const deadline = Date.now() + s.queueTimeoutMs;
    for (;;) {
      const a = await local.acquire({ prefer: opts.prefer, exclude: refused });
      if (a.kind === 'unavailable' && a.reason === 'exhausted' && !refreshed && sharedMode) {
        // The local view may be behind: other replicas' reservations may have come back.
        refreshed = true;
        await refresh();
        continue;
      }
      if (a.kind !== 'lease') return a;
      const id = `${replica}:${++seq}`;
      const now = Date.now();
      const name = a.lease.name;
      const r = await conn.run('reserve', (c) =>
        define(c).etagereReserve(tokenKey(name), resKey(name), now, id, now + reservationMs, s.perTokenConcurrency, RESET_GRACE_MS),
      );
      if (r === undefined) {
        fallback('reserve failed');
        return a; // local only: the 1/N share keeps this replica inside its part
      }
      recovered();
      // The local lease is counted in `in_flight` already; the shared reply counts it too if granted.
      apply(name, r, local.inFlight(name) - (r[0] === 1 ? 0 : 1));
      if (r[0] === 1) return { kind: 'lease', lease: wrap(a.lease, id) };
      a.lease.cancel();
      const [, limit, remaining, reset, paused, dead, known, reserved] = r;
      const left = known === 0 || now >= reset * 1000 + RESET_GRACE_MS ? limit : remaining;
      if (dead === 1 || paused > now || left <= 0 || reserved === 0) {
        refused.add(name); // spent, paused or dead for every replica: try another token
        continue;
      }
      // Quota is there but held by other replicas' requests (or the token is at its cap):
      // those come back soon, so wait a little and ask again.
      if (Date.now() + BUSY_RETRY_MS > deadline) return { kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 };
      await new Promise<void>((resolve) => setTimeout(resolve, BUSY_RETRY_MS).unref());
    }
  };

  return {
    names: local.names,
    equivalent: local.equivalent,
    acquire,
    rateLimit: () => local.rateLimit(),
    snapshot: () => local.snapshot(),
    queueLength: () => local.queueLength(),
    authorizationOf: (name) => local.authorizationOf(name),
    learn(name, status, observation, error) {
      local.learn(name, status, observation, error);
      if (error !== undefined) return;
      const header = (h: string): string | undefined => {
        if (observation === undefined) return undefined;
        if (h === 'x-ratelimit-limit') return String(observation.limit);
        if (h === 'x-ratelimit-remaining') return String(observation.remaining);
        if (h === 'x-ratelimit-reset') return String(observation.reset);
        if (h === 'x-ratelimit-resource') return observation.resource;
        return undefined;
      };
      settleShared(name, '', status, header, status === 401 ? { kind: 'dead' } : { kind: 'ok' });
    },
    close() {
      clearInterval(timer);
      void conn.run('unheartbeat', (c) => c.zrem(`${base}replicas`, replica));
      local.close();
    },
    shared: () => sharedMode,
    replicas: () => n,
  };
}
