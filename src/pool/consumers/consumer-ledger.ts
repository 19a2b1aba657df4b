/**
 * What each consumer spent of the pool, per rate-limit resource and window (fair-share.ts has the
 * rules that read it). A request's unit is counted when it is admitted and given back when nothing
 * went upstream (no token), so a burst of concurrent requests is counted before any of them
 * returns; a request that sent more than one upstream request (retries) adds the others.
 *
 * - local: one process's counters (no Redis, or `redis.shared_tokens: false`); a cluster worker
 *   without Redis counts 1/workers of everything (its siblings count theirs).
 * - shared: counters in Redis, one per consumer, resource and window, that expire when their
 *   window ends, so shares hold across replicas. One script counts the unit and reads every
 *   consumer's counter in the same step; a refused unit is given back.
 * - Redis unavailable: the replica goes on with local counters and takes 1/N of everything (N the
 *   live replicas the token budget counts), starting from the shared counters it saw last: a
 *   counted local allowance, as the token budget does (shared-pool.ts). When Redis answers again
 *   the shared counters take over: at the next count, or at the next probe (every REJOIN_PROBE_MS
 *   while in fallback), whichever comes first, so the return needs no traffic.
 *
 * Keys carry consumer names, never keys: `<prefix>{consumers}:<resource>:<window>:<name>` and
 * `<prefix>{consumers}:hour:<hour>:<name>`, in one Redis Cluster slot.
 */
import type { Logger } from '../../platform/log/logger.js';
import type { RedisClient, RedisConnection } from '../../platform/redis/connection.js';
import { hourOf, windowOf, type Window } from '../rules/fair-share.js';
import { REJOIN_PROBE_MS } from '../backends/shared-sync.js';

/** Counts the unit, then reads every consumer's counter (KEYS: the window's counters, then this consumer's hour). */
const SPEND = `
local own = tonumber(ARGV[1])
redis.call('INCR', KEYS[own])
redis.call('PEXPIREAT', KEYS[own], ARGV[2])
redis.call('INCR', KEYS[#KEYS])
redis.call('PEXPIREAT', KEYS[#KEYS], ARGV[3])
local out = {}
for i = 1, #KEYS do out[i] = tonumber(redis.call('GET', KEYS[i]) or '0') end
return out
`;

/** Gives one unit back to each counter that still holds one (an expired counter is not recreated). */
const REFUND = `
for i = 1, #KEYS do
  if tonumber(redis.call('GET', KEYS[i]) or '0') > 0 then redis.call('DECR', KEYS[i]) end
end
return 1
`;

/** Counters outlive their window by this much (replicas' clocks differ a little). */
const EXPIRY_GRACE_MS = 60_000;

interface LedgerCommands {
  etagereConsumerSpend(numKeys: number, ...keysAndArgs: Array<string | number>): Promise<number[]>;
  etagereConsumerRefund(numKeys: number, ...keys: string[]): Promise<number>;
}

function define(client: RedisClient): RedisClient & LedgerCommands {
  const withCommands = client as RedisClient & Partial<LedgerCommands>;
  if (withCommands.etagereConsumerSpend === undefined) {
    client.defineCommand('etagereConsumerSpend', { lua: SPEND });
    client.defineCommand('etagereConsumerRefund', { lua: REFUND });
  }
  return client as RedisClient & LedgerCommands;
}

/** What a consumer's unit met: every consumer's spending in the window (this unit included) and its own this hour. */
export interface Counted {
  readonly window: Window;
  readonly spent: ReadonlyMap<string, number>;
  readonly hourSpent: number;
  /** 1 normally; 1/N while the shared counters are out of reach (this replica's part of everything). */
  readonly part: number;
  /** Gives the unit back (nothing went upstream, or it was refused). */
  refund(): void;
  /** Counts `units` more (the request sent that many more upstream requests). */
  add(units: number): void;
}

export type LedgerMode = 'local' | 'shared' | 'fallback';

export interface Ledger {
  count(consumer: string, resource: string, nowMs: number): Promise<Counted>;
  /** Every consumer's spending in the current window of `resource`, as this process saw it last. */
  seen(resource: string, nowMs: number): { spent: ReadonlyMap<string, number>; hourSpent: ReadonlyMap<string, number> };
  /** Resources with counters in their current window. */
  resources(nowMs: number): string[];
  mode(): LedgerMode;
  /** Stops the probe that looks for Redis during an outage. */
  close(): void;
}

/** Counters of one window: the window's id and each consumer's units. */
interface Tally {
  id: number;
  readonly units: Map<string, number>;
}

/** The tally of the current window, a fresh one when the window moved on. */
function current(tallies: Map<string, Tally>, name: string, id: number): Tally {
  let tally = tallies.get(name);
  if (tally === undefined || tally.id !== id) {
    tally = { id, units: new Map() };
    tallies.set(name, tally);
  }
  return tally;
}

function add(tally: Tally, consumer: string, units: number): void {
  tally.units.set(consumer, Math.max(0, (tally.units.get(consumer) ?? 0) + units));
}

/** A counted unit's way back, and units added to it: in the tallies, and through `remote` (Redis) when given. */
function unitsOf(
  tally: Tally,
  hourTally: Tally,
  consumer: string,
  remote?: Pick<Counted, 'refund' | 'add'>,
): Pick<Counted, 'refund' | 'add'> {
  return {
    refund() {
      add(tally, consumer, -1);
      add(hourTally, consumer, -1);
      remote?.refund();
    },
    add(units) {
      add(tally, consumer, units);
      add(hourTally, consumer, units);
      remote?.add(units);
    },
  };
}

/** The Redis side of a unit: its window's and its hour's counters, which expire at these times (epoch ms). */
function inRedis(conn: RedisConnection, keys: { window: string; hour: string }, expiries: { window: number; hour: number }) {
  return {
    refund: () => void conn.run('consumer-refund', (client) => define(client).etagereConsumerRefund(2, keys.window, keys.hour)),
    // Plain commands in one slot ({consumers}), with the expiries SPEND set.
    add: (units: number) =>
      void conn.run('consumer-charge', (client) =>
        client
          .multi()
          .incrby(keys.window, units)
          .pexpireat(keys.window, expiries.window)
          .incrby(keys.hour, units)
          .pexpireat(keys.hour, expiries.hour)
          .exec(),
      ),
  };
}

export interface LedgerSettings {
  readonly consumers: readonly string[];
  /** Live replicas (the token budget's heartbeat count). */
  readonly replicas: () => number;
  /** Without Redis: the part of each share this process counts alone (1/workers in a cluster worker). */
  readonly localPart?: number | undefined;
  readonly redis?: RedisConnection | undefined;
  readonly logger: Logger;
}

export function createLedger(settings: LedgerSettings): Ledger {
  const { redis } = settings;
  const log = settings.logger.child({ component: 'consumer-budget' });
  /** This process's counters (by resource; the hour apart): everything without Redis, an outage's spending with it. */
  const local = { windows: new Map<string, Tally>(), hours: new Map<string, Tally>() };
  /** The shared counters as last read: where an outage's allowance starts, and what /admin/consumers shows. */
  const shared = { windows: new Map<string, Tally>(), hours: new Map<string, Tally>() };
  let mode: LedgerMode = redis === undefined ? 'local' : 'shared';
  // Defined now, before any command: an auto-pipeline started earlier in a tick would not know them.
  if (redis !== undefined) define(redis.client);
  const namesWith = (consumer: string): string[] =>
    settings.consumers.includes(consumer) ? [...settings.consumers] : [...settings.consumers, consumer];

  const countLocally = (consumer: string, resource: string, window: Window, hour: Window): Counted => {
    const tally = current(local.windows, resource, window.id);
    const hourTally = current(local.hours, '', hour.id);
    add(tally, consumer, 1);
    add(hourTally, consumer, 1);
    const part = mode === 'fallback' ? 1 / Math.max(1, settings.replicas()) : (settings.localPart ?? 1);
    const before = (tallies: Map<string, Tally>, key: string, id: number, name: string): number => {
      const base = mode === 'fallback' ? tallies.get(key) : undefined;
      return base !== undefined && base.id === id ? (base.units.get(name) ?? 0) * part : 0;
    };
    const spent = new Map<string, number>();
    for (const name of namesWith(consumer))
      spent.set(name, before(shared.windows, resource, window.id, name) + (tally.units.get(name) ?? 0));
    const hourSpent = before(shared.hours, '', hour.id, consumer) + (hourTally.units.get(consumer) ?? 0);
    return { window, spent, hourSpent, part, ...unitsOf(tally, hourTally, consumer) };
  };

  const countShared = async (conn: RedisConnection, consumer: string, resource: string, window: Window, hour: Window) => {
    const base = `${conn.prefix}{consumers}:`;
    const names = namesWith(consumer);
    const keys = [...names.map((name) => `${base}${resource}:${window.id}:${name}`), `${base}hour:${hour.id}:${consumer}`];
    const own = names.indexOf(consumer);
    const args = [own + 1, window.endMs + EXPIRY_GRACE_MS, hour.endMs + EXPIRY_GRACE_MS];
    const reply = await conn.run('consumer-spend', (client) => define(client).etagereConsumerSpend(keys.length, ...keys, ...args));
    if (reply === undefined || reply.length !== keys.length) return undefined;
    const tally = current(shared.windows, resource, window.id);
    const hourTally = current(shared.hours, '', hour.id);
    const spent = new Map<string, number>();
    names.forEach((name, index) => spent.set(name, Number(reply[index]) || 0));
    for (const [name, units] of spent) tally.units.set(name, units);
    const hourSpent = Number(reply[names.length]) || 0;
    hourTally.units.set(consumer, hourSpent);
    const remote = inRedis(conn, { window: keys[own]!, hour: keys.at(-1)! }, { window: args[1]!, hour: args[2]! });
    return { window, spent, hourSpent, part: 1, ...unitsOf(tally, hourTally, consumer, remote) };
  };

  let probe: NodeJS.Timeout | undefined;
  /** Redis answered: its counters take over again (the outage's local counts were this replica's part only). */
  const rejoined = (): void => {
    if (probe !== undefined) clearInterval(probe);
    probe = undefined;
    if (mode !== 'fallback') return;
    local.windows.clear();
    local.hours.clear();
    mode = 'shared';
    log.info('consumer shares: counted through Redis again');
  };
  const fellBack = (conn: RedisConnection): void => {
    if (mode !== 'shared') return;
    mode = 'fallback';
    log.warn({ replicas: settings.replicas() }, 'consumer shares: Redis unavailable, this replica now counts 1/N of each share itself');
    probe = setInterval(() => {
      void conn.run('consumer-probe', (client) => client.ping()).then((pong) => pong !== undefined && rejoined());
    }, REJOIN_PROBE_MS);
    probe.unref();
  };

  return {
    async count(consumer, resource, nowMs) {
      const window = windowOf(resource, nowMs);
      const hour = hourOf(nowMs);
      if (redis === undefined) return countLocally(consumer, resource, window, hour);
      const counted = await countShared(redis, consumer, resource, window, hour);
      if (counted !== undefined) {
        rejoined();
        return counted;
      }
      fellBack(redis);
      return countLocally(consumer, resource, window, hour);
    },
    close() {
      if (probe !== undefined) clearInterval(probe);
      probe = undefined;
    },
    seen(resource, nowMs) {
      const from = mode === 'shared' ? shared : local;
      const pick = (tally: Tally | undefined, id: number): ReadonlyMap<string, number> =>
        tally !== undefined && tally.id === id ? tally.units : new Map();
      return {
        spent: pick(from.windows.get(resource), windowOf(resource, nowMs).id),
        hourSpent: pick(from.hours.get(''), hourOf(nowMs).id),
      };
    },
    resources(nowMs) {
      const names = new Set<string>();
      for (const from of [local, shared])
        for (const [name, tally] of from.windows) if (tally.id === windowOf(name, nowMs).id) names.add(name);
      return [...names];
    },
    mode: () => mode,
  };
}
