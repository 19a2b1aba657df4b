/**
 * The shared token budget's reading side (shared-pool.ts is the spending side): one replica's
 * view (`Budget`), the heartbeat that counts replicas and reads every token's shared numbers
 * back, the fall-back to a local allowance when Redis fails, and the return to the shared budget.
 *
 * The heartbeat runs every heartbeatMs, and every REJOIN_PROBE_MS while the budget is local, and
 * once more each time the connection is ready: the first answer from Redis ends the outage for
 * this replica whether or not a request arrives. What Redis lost (it restarted empty) is given
 * back from what this replica knows, merged as an answer would be.
 */
import type { Logger } from '../../platform/log/logger.js';
import type { RedisClient, RedisConnection } from '../../platform/redis/connection.js';
import {
  type BudgetKeys,
  decodeReply,
  HEARTBEAT,
  READ,
  readArgs,
  REPLY_LENGTH,
  RESERVE,
  SETTLE,
  settleArgs,
  type Reply,
} from './shared-scripts.js';
import type { Settlement } from '../rules/state.js';
import { RESOURCES, type Resource } from '../rules/rate-limit.js';
import type { LocalTokenPool, RateObservation } from '../rules/types.js';

interface BudgetCommands {
  etagereReserve(tokenKey: string, reservationsKey: string, pointsKey: string, ...args: Array<string | number>): Promise<Reply>;
  etagereSettle(tokenKey: string, reservationsKey: string, ...args: Array<string | number>): Promise<Reply>;
  etagereHeartbeat(replicasKey: string, ...args: Array<string | number>): Promise<number>;
  etagereRead(numKeys: number, ...keysAndArgs: Array<string | number>): Promise<number[]>;
}

export function define(client: RedisClient): RedisClient & BudgetCommands {
  const withCommands = client as RedisClient & Partial<BudgetCommands>;
  if (withCommands.etagereReserve === undefined) {
    client.defineCommand('etagereReserve', { numberOfKeys: 3, lua: RESERVE });
    client.defineCommand('etagereSettle', { numberOfKeys: 2, lua: SETTLE });
    client.defineCommand('etagereHeartbeat', { numberOfKeys: 1, lua: HEARTBEAT });
    client.defineCommand('etagereRead', { lua: READ });
  }
  return client as RedisClient & BudgetCommands;
}

export interface SharedBudgetSettings {
  perTokenConcurrency: number;
  maxConcurrency: number;
  /** How long a reservation lives if its replica never settles it (crash). */
  reservationMs?: number;
  heartbeatMs?: number;
  /** How long a request may wait for other replicas' reservations to come back. */
  queueTimeoutMs: number;
  /** Secondary-limit points per minute of each token (PoolSettings.points); absent: no pacing. */
  points?: { readonly rest: number; readonly graphql: number } | undefined;
}

/** How often a replica asks Redis again during an outage (the heartbeat), to rejoin the shared budget soon after it answers. */
export const REJOIN_PROBE_MS = 250;

/** One replica's view of the shared budget: the functions below take it. */
export interface Budget {
  readonly local: LocalTokenPool;
  readonly conn: RedisConnection;
  readonly settings: SharedBudgetSettings;
  readonly log: Logger;
  /** This replica's id (heartbeats, reservation ids). */
  readonly replica: string;
  readonly keys: BudgetKeys;
  readonly reservationMs: number;
  /** Secondary limits in a row per token, as this replica saw them (they double its pauses). */
  readonly repeats: Map<string, number>;
  seq: number;
  replicaCount: number;
  sharedMode: boolean;
}

/** The reply (of one resource) as this replica's view: remaining minus other replicas' reservations. */
export function syncFrom(budget: Budget, name: string, reply: readonly number[], mine: number, resource: Resource): void {
  const { numbers, reserved } = decodeReply(reply);
  budget.local.sync(name, { ...numbers, remaining: numbers.remaining - Math.max(0, reserved - mine) }, resource);
}

export function fallback(budget: Budget, why: string): void {
  if (!budget.sharedMode) return;
  budget.sharedMode = false;
  budget.local.scaleRemaining(1 / budget.replicaCount);
  budget.log.warn(
    { replicas: budget.replicaCount, why },
    'token budget: Redis unavailable, this replica now spends at most 1/N of what was left',
  );
}

export function recovered(budget: Budget): void {
  if (budget.sharedMode) return;
  budget.sharedMode = true;
  budget.local.endAllowances();
  budget.log.info('token budget: shared through Redis again');
}

/**
 * Gives Redis the numbers this replica knows of a token's resource when Redis knows none (it came
 * back empty after a restart): the upstream's last report, merged as an answer's would be (within
 * one window the lowest remaining wins), so every replica goes on from it rather than from an
 * unseen token's single unit.
 */
function seed(budget: Budget, name: string, resource: Resource, numbers: Omit<RateObservation, 'resource'>): void {
  const settlement: Settlement = {
    resource,
    observation: { limit: numbers.limit, remaining: numbers.remaining, reset: numbers.reset, resource },
    verdict: 'ok',
    exhaustedReset: undefined,
    pauseUntil: 0,
    deadUntil: 0,
    numberless: false,
  };
  const args = settleArgs('', settlement, Date.now());
  void budget.conn
    .run('seed', (client) => define(client).etagereSettle(budget.keys.token(name), budget.keys.reservations(name), ...args))
    .then((reply) => {
      if (reply !== undefined) syncFrom(budget, name, reply, budget.local.inFlight(name, resource), resource);
    });
}

/**
 * Reads every token's shared numbers into the local view (others' spending since we last asked).
 * `rejoining` (the first answer after an outage): what Redis lost and this replica knows is given back.
 */
export async function refresh(budget: Budget, rejoining = false): Promise<void> {
  const { local, keys } = budget;
  const all = local.names.flatMap((name) => [keys.token(name), keys.reservations(name)]);
  const flat = await budget.conn.run('read', (client) =>
    define(client).etagereRead(all.length, ...all, ...readArgs(Date.now(), RESOURCES)),
  );
  if (flat === undefined) return;
  const known = new Map(rejoining ? local.snapshot().map((token) => [token.name, token.resources]) : []);
  local.names.forEach((name, index) => {
    RESOURCES.forEach((resource, nth) => {
      const at = (index * RESOURCES.length + nth) * REPLY_LENGTH;
      const reply = flat.slice(at, at + REPLY_LENGTH);
      if (reply.length !== REPLY_LENGTH) return;
      const mine = known.get(name)?.[resource];
      // Redis lost what this replica knows (restarted empty): it learns it back.
      if (!decodeReply(reply).numbers.known && mine !== undefined) seed(budget, name, resource, mine);
      // A resource nobody learnt stays unseen here: only known numbers are synced.
      else if (resource === 'core' || decodeReply(reply).numbers.known)
        syncFrom(budget, name, reply, local.inFlight(name, resource), resource);
    });
  });
}

/** Counts live replicas (this one included), takes this replica's share of the cap, then refreshes. */
async function heartbeat(budget: Budget, heartbeatMs: number): Promise<void> {
  const now = Date.now();
  const replicas = budget.keys.replicas;
  const live = await budget.conn.run('heartbeat', (client) =>
    define(client).etagereHeartbeat(replicas, now, budget.replica, now + heartbeatMs * 3),
  );
  if (live === undefined) {
    fallback(budget, 'heartbeat failed');
    return;
  }
  budget.replicaCount = Math.max(1, Number(live));
  budget.local.setMaxConcurrency(Math.max(1, Math.floor(budget.settings.maxConcurrency / budget.replicaCount)));
  await refresh(budget, !budget.sharedMode);
  // Redis answers: the shared numbers are read back, so the local allowances end, traffic or not.
  recovered(budget);
}

/**
 * Keeps the heartbeat going until `stop`: every heartbeatMs, every REJOIN_PROBE_MS while the budget
 * is local (a command skipped while the connection is down costs nothing), and at each `ready` of
 * the connection. Its timers never hold the process open.
 */
export function keepBeating(budget: Budget, heartbeatMs: number): { stop(): void } {
  const beat = (): void => void heartbeat(budget, heartbeatMs);
  // First beat as soon as the connection is ready (a beat before that would count as an outage).
  if (budget.conn.client.status === 'ready') beat();
  budget.conn.client.on('ready', beat);
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const schedule = (): void => {
    if (stopped) return;
    const delay = budget.sharedMode ? heartbeatMs : Math.min(heartbeatMs, REJOIN_PROBE_MS);
    timer = setTimeout(() => void heartbeat(budget, heartbeatMs).finally(schedule), delay);
    timer.unref();
  };
  schedule();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      budget.conn.client.off('ready', beat);
    },
  };
}
