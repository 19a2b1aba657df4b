/**
 * The token pool in process: each token's numbers and reservations, the concurrency caps and the
 * wait queue, behind the `TokenPool` interface. The rules live elsewhere and are only applied
 * here: which token to use is `chooseToken` (choose.ts); what an answer says is `classify` and
 * `readRateLimit` (rate-limit.ts); what that does to the token is `react` and `settle` (state.ts);
 * waiting is queue.ts; what the pool reports is report.ts.
 *
 * A token has one window per rate-limit resource (local-token.ts): a request is chosen, reserved
 * and settled in its resource, so spending or exhausting search never blocks core. Pauses
 * (secondary limits), death (a confirmed 401) and the per-token concurrency cap are the token's.
 *
 * Beside the shared numbers, each token keeps what only this process knows: its leases in flight,
 * its secondary limits in a row, its last error, and during a Redis outage the `allowance` this
 * replica may still spend on its own (see shared-pool.ts).
 *
 * Token values stay inside this module and the `authorization` of a lease.
 */
import { chooseToken } from '../rules/choose.js';
import { queueBounds } from '../rules/fair-share.js';
import { changesAnything, diffMembers } from '../rules/membership.js';
import {
  endAllowances,
  knows,
  newToken,
  revalue,
  scaleWindows,
  tokenReport,
  usable,
  view,
  windowOf,
  write,
  type Token,
  type Window,
  budgetOf,
  heldUntil,
  holdPace,
  paced,
  pacedUntil,
  paceKindOf,
  pointsOfRequest,
  readyAt,
  refund,
  spend,
} from './local-token.js';
import { createWaitQueue, busy, type Attempt, type WaitQueue } from './queue.js';
import { ConsumerPace } from './consumer-pace.js';
import { classify, mentionsRateLimit, readRateLimit, RESOURCES, resourceNamed, type Resource } from '../rules/rate-limit.js';
import { agreementKey, learnScopes, scopeAgreement, scopesRow } from '../rules/scopes.js';
import { poolRateLimit } from '../rules/report.js';
import { fallbackReset, hasQuota, observe, react, settle, upstreamConcurrency, type Settlement } from '../rules/state.js';
import type {
  AcquireOptions,
  Lease,
  Learnt,
  LocalTokenPool,
  MembershipChange,
  PoolEvents,
  PoolRateLimit,
  PoolSettings,
  PoolToken,
  RateObservation,
  TokenNumbers,
  TokenState,
  Acquired,
  PaceKind,
} from '../rules/types.js';

/** Recent secondary-limit hits kept for the whole-upstream slowdown. */
const MAX_HITS = 64;
/** Retry-After when every token is dead: nothing comes back by itself. */
const ALL_DEAD_RETRY_AFTER_S = 60;

/** One pool's state: the functions below take it, so none of them is a closure over the others. */
interface Pool {
  readonly settings: PoolSettings;
  readonly now: () => number;
  readonly events: PoolEvents;
  /** The members, in the order given (replaceMembers swaps these three together). */
  tokens: readonly Token[];
  byName: ReadonlyMap<string, Token>;
  names: readonly string[];
  /** Membership changes so far. */
  generation: number;
  /** Recent secondary limits (for the whole-upstream slowdown). */
  readonly hits: Array<{ at: number; token: string }>;
  readonly queue: WaitQueue;
  maxConcurrency: number;
  /** Leases in flight over every token. */
  total: number;
  closed: boolean;
  /** Bumped on every change of the numbers (the rate-limit memo's key). */
  version: number;
  /** The pool as one quota, per resource, computed at most once a second between changes. */
  readonly rateMemo: Map<Resource, { version: number; second: number; value: PoolRateLimit }>;
  /** settings.equivalent, unless the members' reported scopes differ (scopes.ts). */
  equivalent: boolean;
  /** The scope agreement last told to `events.scopes` (agreementKey), and whether a telling is due. */
  scopesTold: string;
  scopesDue: boolean;
  /** The share of each points budget this process spends on its own (1, or 1/N while the shared budget is out of reach). */
  paceShare: number;
  /** With consumer keys: what each consumer asked of the points and spent, for what it leaves the others (points-share.ts). */
  readonly consumerPace: ConsumerPace | undefined;
}

function fail(token: Token, at: number, message: string): void {
  token.lastError = message;
  token.lastErrorAt = at;
}

/**
 * Applies a settlement to the token's window of the settlement's resource (and to its pause and
 * death), then tells the logs and metrics what newly went wrong, or came back.
 */
function apply(pool: Pool, token: Token, status: number, settlement: Settlement, at: number): void {
  const wasDead = token.dead;
  const wasUnlimited = token.unlimited;
  const { resource } = settlement;
  write(token, resource, settle(view(token, resource), settlement, at));
  if (token.unlimited && !wasUnlimited) pool.events.unlimited?.(token.name);
  if (settlement.verdict === 'dead' && !wasDead) {
    fail(token, at, `401 from upstream, confirmed by GET /rate_limit: token is invalid or revoked`);
    pool.events.dead?.(token.name);
  } else if ((settlement.verdict === 'alive' || settlement.verdict === 'unlimited') && wasDead) {
    pool.events.revived?.(token.name);
  } else if (settlement.verdict === 'exhausted') {
    const reset = windowOf(token, resource).reset;
    fail(token, at, `${status} from upstream: ${resource} rate limit exhausted until ${new Date(reset * 1000).toISOString()}`);
    pool.events.exhausted?.(token.name, reset, resource);
  } else if (settlement.verdict === 'secondary') {
    const pause = settlement.pauseUntil - at;
    pool.hits.push({ at, token: token.name });
    if (pool.hits.length > MAX_HITS) pool.hits.shift();
    fail(token, at, `${status} from upstream: secondary rate limit, paused for ${Math.ceil(pause / 1000)} s`);
    pool.events.secondary?.(token.name, pause);
  }
}

/**
 * The members or their scopes changed: the pool's equivalence follows at once (the cache reads it
 * per request); the events hear of a new agreement once the change has settled (after the current
 * job: a reload's new members and their probes' answers are applied in one), never twice the same.
 */
function rescope(pool: Pool): void {
  const agreement = scopeAgreement(pool.tokens.map((token) => scopesRow(token.name, token.scopes)));
  pool.equivalent = pool.settings.equivalent && !agreement.differ;
  if (pool.scopesDue) return;
  pool.scopesDue = true;
  queueMicrotask(() => {
    pool.scopesDue = false;
    const now = scopeAgreement(pool.tokens.map((token) => scopesRow(token.name, token.scopes)));
    const key = agreementKey(now);
    if (key === pool.scopesTold) return;
    pool.scopesTold = key;
    pool.events.scopes?.(now);
  });
}

/** What an answer with `token`'s credential `authorization` said of its scopes (a lease of a replaced value teaches nothing). */
function noteScopes(pool: Pool, token: Token, authorization: string, header: string | undefined, status: number): void {
  if (authorization !== token.authorization) return;
  const next = learnScopes(token.scopes, header, status);
  if (next === undefined) return;
  token.scopes = next;
  rescope(pool);
}

/** The numbers changed or a reservation came back: waiters may be served now. */
function changed(pool: Pool): void {
  pool.version++;
  pool.queue.pump();
}

function release(pool: Pool, token: Token, window: Window): void {
  token.inFlight--;
  window.inFlight--;
  pool.total--;
  changed(pool);
}

function lease(pool: Pool, token: Token, resource: Resource, switched: boolean, opts: AcquireOptions): Lease {
  const reserved = windowOf(token, resource);
  const kind = paceKindOf(resource);
  const budget = budgetOf(pool.settings.points, kind, pool.paceShare);
  if (budget !== undefined) {
    const at = pool.now();
    const charge = spend(token, kind, pointsOfRequest(opts), budget, at, opts.consumer);
    pool.consumerPace?.spend(opts.consumer, kind, charge, at);
    pool.events.spent?.(token.name, kind, charge);
  }
  token.inFlight++;
  reserved.inFlight++;
  pool.total++;
  pool.version++;
  let done = false;
  const { authorization } = token;
  return {
    name: token.name,
    resource,
    authorization,
    switched,
    settle(status, header, body) {
      const at = pool.now();
      const verdict = classify(status, header, body, at);
      if (done) return verdict;
      done = true;
      const reaction = react(status, verdict, readRateLimit(header), token.secondaryRepeats, at, resource, !mentionsRateLimit(header));
      token.secondaryRepeats = reaction.repeats;
      apply(pool, token, status, reaction.settlement, at);
      noteScopes(pool, token, authorization, header('x-oauth-scopes'), status);
      const spentIn = windowOf(token, reaction.settlement.resource);
      // An authorised 304 is free; the window's own numbers are the answer's, merged above.
      if (spentIn.allowance !== undefined && status !== 304) spentIn.allowance = Math.max(0, spentIn.allowance - 1);
      release(pool, token, reserved);
      return verdict;
    },
    cancel() {
      if (done) return;
      done = true;
      release(pool, token, reserved);
    },
  };
}

function retryAfterSeconds(retryAt: number | undefined, at: number): number {
  return retryAt === undefined ? ALL_DEAD_RETRY_AFTER_S : Math.max(1, Math.ceil((retryAt - at) / 1000));
}

/**
 * The end of the earliest secondary-limit pause (or pacing wait) of a token that still has quota,
 * when it is within the queue timeout: worth waiting for (a short pause, not a new window). Quota
 * exhaustion is never waited for: that answer is a 429 with Retry-After.
 */
function shortPauseEnd(
  pool: Pool,
  at: number,
  tokens: readonly TokenState[],
  exclude: ReadonlySet<string> | undefined,
): number | undefined {
  let end: number | undefined;
  for (const token of tokens) {
    if (token.dead || token.pausedUntil <= at || exclude?.has(token.name) === true) continue;
    if (!hasQuota(token, token.pausedUntil)) continue;
    if (end === undefined || token.pausedUntil < end) end = token.pausedUntil;
  }
  return end !== undefined && end - at <= pool.settings.queueTimeoutMs ? end : undefined;
}

/** The tokens as choice sees them in the request's resource, each paused until its points are back when they are short. */
function choosable(pool: Pool, opts: AcquireOptions, resource: Resource, at: number): TokenState[] {
  const kind = paceKindOf(resource);
  const budget = budgetOf(pool.settings.points, kind, pool.paceShare);
  const points = pointsOfRequest(opts);
  const background = opts.background === true;
  return pool.tokens.map((token) => {
    const state = usable(token, resource);
    return budget === undefined ? state : paced(state, readyAt(token, kind, budget, points, at, background), at);
  });
}

/**
 * When points are what holds the request (every live token is short of them), a 429 with the
 * seconds until they come back; else undefined (a waiter's answer is then the queue's busy).
 */
function pacedRefusal(pool: Pool, opts: AcquireOptions): Acquired | undefined {
  const at = pool.now();
  const kind: PaceKind = paceKindOf(opts.resource ?? 'core');
  const until = pacedUntil(pool.tokens, opts, budgetOf(pool.settings.points, kind, pool.paceShare), kind, at);
  if (until === undefined) return undefined;
  pool.events.rejected?.(opts.background === true ? 'background' : 'paced');
  return { kind: 'unavailable', reason: 'paced', retryAfterSeconds: retryAfterSeconds(until, at) };
}

/** With consumer keys: when the request's consumer must leave the points it would spend to other consumers, until when (points-share.ts). */
function heldBack(pool: Pool, opts: AcquireOptions, resource: Resource, at: number): number | undefined {
  const kind = paceKindOf(resource);
  const budget = budgetOf(pool.settings.points, kind, pool.paceShare);
  return pool.consumerPace === undefined ? undefined : heldUntil(pool.tokens, pool.consumerPace, opts, budget, kind, at);
}

/**
 * A waiter whose time ran out while the points left were owed to other consumers: its consumer's
 * 429 (a consumer refusal: never handed to another consumer coalesced onto it), with the seconds
 * until some come back.
 */
function heldRefusal(pool: Pool, opts: AcquireOptions): Acquired | undefined {
  const at = pool.now();
  const until = heldBack(pool, opts, opts.resource ?? 'core', at);
  if (until === undefined) return undefined;
  pool.events.rejected?.('paced');
  return { kind: 'unavailable', reason: 'points', retryAfterSeconds: retryAfterSeconds(until, at) };
}

/** A lease, an answer that none is coming, or a wait (until a reservation comes back, or until `until`). */
function attempt(pool: Pool, opts: AcquireOptions): Attempt {
  if (pool.closed) return busy();
  const at = pool.now();
  const maxInFlight = pool.settings.perTokenConcurrency;
  const resource = opts.resource ?? 'core';
  const tokens = choosable(pool, opts, resource, at);
  const choice = chooseToken({ tokens, now: at, maxInFlight, prefer: opts.prefer, exclude: opts.exclude });
  if (choice.kind === 'wait') return choice;
  if (choice.kind === 'none') {
    const until = shortPauseEnd(pool, at, tokens, opts.exclude);
    if (until !== undefined) return { kind: 'wait', until };
    const pacedAnswer = choice.retryAt === undefined ? undefined : pacedRefusal(pool, opts);
    if (pacedAnswer !== undefined) return pacedAnswer;
    const reason = choice.retryAt === undefined ? 'dead' : 'exhausted';
    pool.events.rejected?.(reason);
    return { kind: 'unavailable', reason, retryAfterSeconds: retryAfterSeconds(choice.retryAt, at) };
  }
  // Points a token has, but other consumers are owed: this request waits, while others may go (`own`).
  const held = heldBack(pool, opts, resource, at);
  if (held !== undefined) return { kind: 'wait', until: held, own: true };
  if (pool.total >= upstreamConcurrency(pool.maxConcurrency, pool.hits, at)) return { kind: 'wait' };
  return { kind: 'lease', lease: lease(pool, pool.byName.get(choice.name)!, resource, choice.switched, opts) };
}

/** The pool as one quota in a resource, computed at most once a second between changes. */
function rateLimit(pool: Pool, resource: Resource): PoolRateLimit {
  const at = pool.now();
  const second = Math.floor(at / 1000);
  const memo = pool.rateMemo.get(resource);
  if (memo !== undefined && memo.version === pool.version && memo.second === second) return memo.value;
  const value = poolRateLimit(
    pool.tokens.filter((token) => token.unlimited || knows(token, resource)).map((token) => usable(token, resource)),
    at,
  );
  pool.rateMemo.set(resource, { version: pool.version, second, value });
  return value;
}

function rateLimits(pool: Pool): Partial<Record<Resource, PoolRateLimit>> {
  const out: Partial<Record<Resource, PoolRateLimit>> = {};
  for (const resource of RESOURCES) {
    if (resource === 'core' || pool.tokens.some((token) => !token.dead && knows(token, resource)))
      out[resource] = rateLimit(pool, resource);
  }
  return out;
}

/** One observation or a list of them (GET /rate_limit's every resource); none for `unlimited`. */
function listOf(observation: Learnt): readonly RateObservation[] {
  if (observation === undefined || observation === 'unlimited') return [];
  return 'limit' in observation ? [observation] : observation;
}

/**
 * What GET /rate_limit said about a token: a 401 kills it (it is the confirmation), a 2xx brings a
 * dead one back, and every resource's numbers are learnt; `unlimited` (404 "Rate limiting is not
 * enabled.") brings it back too, without limits.
 */
function learn(pool: Pool, name: string, status: number, observations: Learnt, error: string | undefined): void {
  const token = pool.byName.get(name);
  if (token === undefined) return;
  const at = pool.now();
  if (error !== undefined) fail(token, at, error);
  else if (status === 401)
    apply(pool, token, status, react(status, { kind: 'dead' }, undefined, token.secondaryRepeats, at).settlement, at);
  else if (observations === 'unlimited')
    apply(pool, token, status, react(status, { kind: 'unlimited' }, undefined, token.secondaryRepeats, at).settlement, at);
  else {
    for (const observation of listOf(observations)) {
      const resource = resourceNamed(observation.resource);
      if (resource !== undefined) write(token, resource, observe(view(token, resource), { ...observation, resource }, resource));
    }
    if (status >= 200 && status < 300)
      apply(pool, token, status, react(status, { kind: 'alive' }, undefined, token.secondaryRepeats, at).settlement, at);
  }
  changed(pool);
}

function sync(pool: Pool, name: string, numbers: TokenNumbers, resource: Resource): void {
  const token = pool.byName.get(name);
  if (token === undefined) return;
  const window = windowOf(token, resource);
  window.allowance = undefined;
  if (numbers.known) {
    window.limit = numbers.limit;
    window.remaining = Math.max(0, numbers.remaining);
    window.reset = numbers.reset;
    window.known = true;
  }
  token.pausedUntil = Math.max(token.pausedUntil, numbers.pausedUntil);
  if (numbers.unlimited && !token.unlimited) pool.events.unlimited?.(token.name);
  token.unlimited = numbers.unlimited;
  if (numbers.dead && !token.dead) {
    token.dead = true;
    fail(token, pool.now(), '401 from upstream (confirmed by another replica): token is invalid or revoked');
  } else if (!numbers.dead && token.dead) {
    // The shared flag is the truth: it expired, or a probe (here or elsewhere) found the token answering.
    token.dead = false;
  }
  changed(pool);
}

/**
 * Makes `next` the members (see MemberPool.replaceMembers): kept and updated members are the same
 * Token objects (their state stays), removed ones leave the lists (leases in flight hold them and
 * settle as usual), added ones start unseen.
 */
function replaceMembers(pool: Pool, next: readonly PoolToken[]): MembershipChange {
  const change = diffMembers(
    pool.tokens.map((token) => ({ name: token.name, value: token.value })),
    next,
  );
  if (!changesAnything(change)) return change;
  const tokens = next.map((member) => {
    const token = pool.byName.get(member.name);
    if (token === undefined) return newToken(member);
    if (token.value !== member.value) revalue(token, member.value);
    return token;
  });
  pool.tokens = tokens;
  pool.byName = new Map(tokens.map((token) => [token.name, token]));
  pool.names = tokens.map((token) => token.name);
  pool.generation++;
  rescope(pool);
  changed(pool); // a new member may take a waiter now
  return change;
}

function scaleRemaining(pool: Pool, share: number): void {
  const at = pool.now();
  pool.paceShare = Math.min(1, Math.max(0, share));
  for (const token of pool.tokens) scaleWindows(token, share, at, fallbackReset(at));
  pool.version++;
}

export function createTokenPool(settings: PoolSettings): LocalTokenPool {
  const now = settings.now ?? Date.now;
  const events = settings.events ?? {};
  const tokens = settings.tokens.map(newToken);
  const pool: Pool = {
    settings,
    now,
    events,
    tokens,
    byName: new Map(tokens.map((token) => [token.name, token])),
    names: tokens.map((token) => token.name),
    generation: 0,
    hits: [],
    queue: createWaitQueue({
      attempt: (opts) => attempt(pool, opts),
      timeoutMs: settings.queueTimeoutMs,
      maxQueue: settings.maxQueue,
      laneBound: settings.consumerWeights === undefined ? undefined : queueBounds(settings.maxQueue, settings.consumerWeights),
      now,
      events,
      timedOut: (opts) => pacedRefusal(pool, opts) ?? heldRefusal(pool, opts),
    }),
    maxConcurrency: settings.maxConcurrency,
    total: 0,
    closed: false,
    version: 0,
    rateMemo: new Map(),
    equivalent: settings.equivalent,
    scopesTold: '',
    scopesDue: false,
    paceShare: 1,
    consumerPace:
      settings.consumerWeights === undefined ? undefined : new ConsumerPace(settings.consumerWeights, settings.reserveFraction ?? 0),
  };
  return {
    get names() {
      return pool.names;
    },
    get equivalent() {
      return pool.equivalent;
    },
    acquire(opts = {}) {
      // Each request asks once (its waits and retries in the queue do not): what its consumer is owed of the points.
      if (opts.background !== true) pool.consumerPace?.ask(opts.consumer, paceKindOf(opts.resource ?? 'core'), now());
      return pool.queue.acquire(opts);
    },
    rateLimit: (resource = 'core') => rateLimit(pool, resource),
    rateLimits: () => rateLimits(pool),
    snapshot() {
      const at = now();
      return pool.tokens.map((token) => tokenReport(token, at));
    },
    queueLength: () => pool.queue.length(),
    learn: (name, status, observation, error) => learn(pool, name, status, observation, error),
    learnScopes(name, header, status) {
      const token = pool.byName.get(name);
      if (token !== undefined) noteScopes(pool, token, token.authorization, header, status);
    },
    authorizationOf: (name) => pool.byName.get(name)?.authorization,
    sync: (name, numbers, resource = 'core') => sync(pool, name, numbers, resource),
    replaceMembers: (next) => replaceMembers(pool, next),
    generation: () => pool.generation,
    setMaxConcurrency(max) {
      pool.maxConcurrency = Math.max(1, max);
      pool.queue.pump();
    },
    scaleRemaining: (share) => scaleRemaining(pool, share),
    endAllowances() {
      pool.paceShare = 1;
      for (const token of pool.tokens) endAllowances(token);
      changed(pool);
    },
    inFlight(name, resource) {
      const token = pool.byName.get(name);
      if (token === undefined) return 0;
      return resource === undefined ? token.inFlight : (token.windows.get(resource)?.inFlight ?? 0);
    },
    holdPoints(name, resource, until) {
      const token = pool.byName.get(name);
      if (token !== undefined) holdPace(token, paceKindOf(resource), until);
    },
    refundPoints(name, resource) {
      const token = pool.byName.get(name);
      if (token !== undefined) refund(token, paceKindOf(resource), pool.consumerPace);
    },
    close() {
      pool.closed = true;
      pool.queue.close();
    },
  };
}
