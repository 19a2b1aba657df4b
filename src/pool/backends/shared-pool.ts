/**
 * The token budget shared by replicas through Redis. Each replica keeps its in-process pool
 * (choice, queue, caps, reactions: local-pool.ts); this layer makes the pool's spending atomic
 * across replicas with the scripts of shared-scripts.ts:
 *
 * - reserve: before a lease is handed out, one script checks the token's shared numbers and every
 *   replica's live reservations, and adds a reservation or refuses. Two replicas can never hand
 *   out the same last unit.
 * - settle: one script drops the reservation and applies what the upstream said (state.ts's rules).
 * - Both work in the request's rate-limit resource (rate-limit.ts): each token has a window per
 *   resource in Redis; a pause or a death is the token's, in every resource.
 * - A confirmed 401 marks the token dead in Redis until DEAD_FLAG_TTL_MS from now (each re-probe
 *   that meets a 401 renews it); a probe that finds it answering clears it for every replica.
 * - Reservations carry an expiry, so a replica that dies mid-request frees its units.
 * - A reserve Redis answers late while it is up is no outage: the lease goes out, and its settle
 *   drops the reservation the script made.
 * - A heartbeat counts live replicas (N): each takes 1/N of the whole-upstream concurrency cap.
 * - Redis unavailable: this replica keeps serving from its own pool, spending at most a local
 *   allowance of 1/N of what was left (beside the upstream's numbers, which it never lowers). The
 *   heartbeat then asks every REJOIN_PROBE_MS: the first answer brings the shared numbers back and
 *   ends the allowances, traffic or not; what Redis lost (restarted empty) the replica gives back.
 * - Membership changes (replaceMembers): a removed member's keys expire REMOVED_STATE_TTL_MS later
 *   (other replicas may still use it until they reload; past the longest window its numbers are
 *   stale anyway), an added or updated member's keys no longer expire, and an updated member's
 *   shared dead flag goes (it was the old credential's).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../../platform/log/logger.js';
import type { RedisConnection } from '../../platform/redis/connection.js';
import { budgetKeys, decodeReply, paceArgs, reservationId, reserveArgs, settleArgs } from './shared-scripts.js';
import { paceKindOf, pointsOfRequest } from './local-token.js';
import { changesAnything } from '../rules/membership.js';
import { heldByOthers, react } from '../rules/state.js';
import { mentionsRateLimit, readRateLimit, type Resource } from '../rules/rate-limit.js';
import { define, fallback, keepBeating, recovered, refresh, syncFrom, type Budget, type SharedBudgetSettings } from './shared-sync.js';
import type {
  AcquireOptions,
  Acquired,
  Lease,
  LocalTokenPool,
  MemberPool,
  MembershipChange,
  RateObservation,
  Verdict,
} from '../rules/types.js';

export { REJOIN_PROBE_MS, type SharedBudgetSettings } from './shared-sync.js';

/** Pause before asking Redis again when a token's units are all reserved by other replicas. */
const BUSY_RETRY_MS = 5;

/** How long a removed member's shared state outlives its removal: an hour (GitHub's longest window) and a margin. */
export const REMOVED_STATE_TTL_MS = 65 * 60_000;

export interface SharedTokenPool extends MemberPool {
  /** True while the budget is shared through Redis; false in the local fallback. */
  shared(): boolean;
  /** Live replicas seen by the heartbeat. */
  replicas(): number;
}

/**
 * Applies an answer to a request in `resource` to the token's shared numbers (`member` '' when
 * nothing was reserved; `silent`: the answer carried no rate-limit header at all).
 */
function settleShared(
  budget: Budget,
  name: string,
  member: string,
  answer: { status: number; observation: RateObservation | undefined; silent: boolean },
  verdict: Verdict | { kind: 'alive' } | { kind: 'unlimited' },
  resource: Resource,
): void {
  const now = Date.now();
  const { status, observation, silent } = answer;
  const reaction = react(status, verdict, observation, budget.repeats.get(name) ?? 0, now, resource, silent);
  if (reaction.repeats === 0) budget.repeats.delete(name);
  else budget.repeats.set(name, reaction.repeats);
  const args = settleArgs(member, reaction.settlement, now);
  const settled = reaction.settlement.resource;
  void budget.conn
    .run('settle', (client) => define(client).etagereSettle(budget.keys.token(name), budget.keys.reservations(name), ...args))
    .then((reply) => {
      if (reply !== undefined) syncFrom(budget, name, reply, budget.local.inFlight(name, settled), settled);
    });
}

/** A local lease whose settle and cancel also reach the shared budget (`member`: its reservation there). */
function sharedLease(budget: Budget, lease: Lease, member: string): Lease {
  return {
    name: lease.name,
    resource: lease.resource,
    authorization: lease.authorization,
    switched: lease.switched,
    settle(status, header, body) {
      const verdict = lease.settle(status, header, body);
      const answer = { status, observation: readRateLimit(header), silent: !mentionsRateLimit(header) };
      settleShared(budget, lease.name, member, answer, verdict, lease.resource);
      return verdict;
    },
    cancel() {
      lease.cancel();
      void budget.conn.run('release', (client) => client.zrem(budget.keys.reservations(lease.name), member));
    },
  };
}

/** The shared side of a membership change (see the top of this file); then the added members' shared numbers. */
function membersChanged(budget: Budget, change: MembershipChange): void {
  const { keys } = budget;
  for (const name of change.removed) budget.repeats.delete(name);
  void budget.conn
    .run('members', (client) => {
      const batch = client.multi();
      for (const name of change.removed) {
        batch.pexpire(keys.token(name), REMOVED_STATE_TTL_MS);
        batch.pexpire(keys.reservations(name), REMOVED_STATE_TTL_MS);
      }
      for (const name of [...change.added, ...change.updated]) batch.persist(keys.token(name)).persist(keys.reservations(name));
      for (const name of change.updated) batch.hset(keys.token(name), 'dead', 0);
      return batch.exec();
    })
    .then(() => refresh(budget));
}

/** A lease from the local pool that Redis also granted (or the local one, in the fallback). */
async function acquire(budget: Budget, opts: AcquireOptions): Promise<Acquired> {
  const { local, keys, settings } = budget;
  const refused = new Set(opts.exclude ?? []);
  let refreshed = false;
  const deadline = Date.now() + settings.queueTimeoutMs;
  for (;;) {
    const acquired = await local.acquire({ ...opts, exclude: refused }); // consumer and weight: the fair order of the wait queue
    if (acquired.kind === 'unavailable' && acquired.reason === 'exhausted' && !refreshed && budget.sharedMode) {
      // The local view may be behind: other replicas' reservations may have come back.
      refreshed = true;
      await refresh(budget);
      continue;
    }
    if (acquired.kind !== 'lease') return acquired;
    const { name, resource } = acquired.lease;
    const member = reservationId(resource, `${budget.replica}:${++budget.seq}`);
    const now = Date.now();
    const kind = paceKindOf(resource);
    const args = [
      ...reserveArgs(now, member, now + budget.reservationMs, settings.perTokenConcurrency, resource),
      ...paceArgs(pointsOfRequest(opts), settings.points?.[kind], opts.background === true),
    ];
    const reply = await budget.conn.run('reserve', (client) =>
      define(client).etagereReserve(keys.token(name), keys.reservations(name), keys.points(name, kind), ...args),
    );
    if (reply === undefined) {
      // Unanswered while Redis is up: a late answer, not an outage. The script went out and makes
      // its reservation when it runs: the lease's settle or cancel drops it, as a granted one's.
      if (budget.conn.up()) return { kind: 'lease', lease: sharedLease(budget, acquired.lease, member) };
      fallback(budget, 'reserve failed');
      return acquired; // local only: the 1/N share keeps this replica inside its part
    }
    recovered(budget);
    const state = decodeReply(reply);
    // The local lease is counted in `in_flight` already; the shared reply counts it too if granted.
    syncFrom(budget, name, reply, local.inFlight(name, resource) - (state.granted ? 0 : 1), resource);
    if (state.granted) return { kind: 'lease', lease: sharedLease(budget, acquired.lease, member) };
    acquired.lease.cancel();
    local.refundPoints(name, resource); // nothing was sent: only the shared log counts what was
    if (state.paceReady > now) {
      // Other replicas spent the token's points: it waits here too, and another token (or a wait) follows.
      local.holdPoints(name, resource, state.paceReady);
      continue;
    }
    // Units of the resource, or slots of the token, held by requests in flight come back soon.
    if (!heldByOthers(state.numbers, state.reservedAll, now)) {
      refused.add(name); // spent, paused or dead for every replica: try another token
      continue;
    }
    // Quota is there but held by other replicas' requests (or the token is at its cap):
    // those come back soon, so wait a little and ask again.
    if (Date.now() + BUSY_RETRY_MS > deadline) return { kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 };
    await new Promise<void>((resolve) => setTimeout(resolve, BUSY_RETRY_MS).unref());
  }
}

export function createSharedTokenPool(
  local: LocalTokenPool,
  conn: RedisConnection,
  settings: SharedBudgetSettings,
  logger: Logger,
): SharedTokenPool {
  // Scripts defined before any command runs: defined on first use, an auto-pipelined command of
  // the same tick can make ioredis fail the batch ("results[i] is not iterable").
  define(conn.client);
  const budget: Budget = {
    local,
    conn,
    settings,
    log: logger.child({ component: 'token-budget' }),
    replica: randomBytes(6).toString('base64url'),
    keys: budgetKeys(conn.prefix),
    reservationMs: settings.reservationMs ?? 120_000,
    repeats: new Map(),
    seq: 0,
    replicaCount: 1,
    sharedMode: true,
  };
  const heartbeat = keepBeating(budget, settings.heartbeatMs ?? 2_000);

  return {
    get names() {
      return local.names;
    },
    get equivalent() {
      return local.equivalent;
    },
    acquire: (opts = {}) => acquire(budget, opts),
    rateLimit: (resource) => local.rateLimit(resource),
    rateLimits: () => local.rateLimits(),
    snapshot: () => local.snapshot(),
    queueLength: () => local.queueLength(),
    authorizationOf: (name) => local.authorizationOf(name),
    replaceMembers(tokens) {
      const change = local.replaceMembers(tokens);
      if (changesAnything(change)) membersChanged(budget, change);
      return change;
    },
    generation: () => local.generation(),
    learnScopes: (name, header, status) => local.learnScopes(name, header, status),
    learn(name, status, observation, error) {
      local.learn(name, status, observation, error);
      if (error !== undefined) return;
      // A 401 is the confirmation (dead, with an expiry); a 2xx proves the token good (the shared
      // flag goes), and so does rate limiting off (the token is unlimited for every replica).
      const verdict =
        status === 401
          ? { kind: 'dead' as const }
          : observation === 'unlimited'
            ? { kind: 'unlimited' as const }
            : status >= 200 && status < 300
              ? { kind: 'alive' as const }
              : { kind: 'ok' as const };
      const observations =
        observation === undefined || observation === 'unlimited' ? [] : 'limit' in observation ? [observation] : observation;
      const silent = false; // a probe's answer never makes a token unlimited by its silence
      if (observations.length === 0) settleShared(budget, name, '', { status, observation: undefined, silent }, verdict, 'core');
      for (const seen of observations) settleShared(budget, name, '', { status, observation: seen, silent }, verdict, 'core');
    },
    close() {
      heartbeat.stop();
      void conn.run('unheartbeat', (client) => client.zrem(budget.keys.replicas, budget.replica));
      local.close();
    },
    shared: () => budget.sharedMode,
    replicas: () => budget.replicaCount,
  };
}
