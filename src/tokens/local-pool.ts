/**
 * The token pool in process: each token's numbers and reservations, the concurrency caps and the
 * wait queue, behind the `TokenPool` interface. The rules live elsewhere and are only applied
 * here: which token to use is `chooseToken` (choose.ts); what an answer says is `classify` and
 * `readRateLimit` (rate-limit.ts); what that does to the token is `react` and `settle` (state.ts);
 * waiting is queue.ts; what the pool reports is report.ts.
 *
 * Beside the shared numbers, each token keeps what only this process knows: its leases in flight,
 * its secondary limits in a row, its last error, and during a Redis outage the `allowance` this
 * replica may still spend on its own (see shared-pool.ts).
 *
 * Token values stay inside this module and the `authorization` of a lease.
 */
import { chooseToken } from './choose.js';
import { createWaitQueue, busy, type Attempt, type WaitQueue } from './queue.js';
import { classify, readRateLimit } from './rate-limit.js';
import { poolRateLimit, reportOf } from './report.js';
import { fallbackReset, observe, quotaLeft, react, settle, UNSEEN, upstreamConcurrency, windowOver, type Settlement } from './state.js';
import type {
  AcquireOptions,
  Lease,
  LocalTokenPool,
  PoolEvents,
  PoolRateLimit,
  PoolSettings,
  PoolToken,
  RateObservation,
  TokenNumbers,
} from './types.js';

type Mutable<Shape> = { -readonly [Key in keyof Shape]: Shape[Key] };

interface Token extends Mutable<TokenNumbers> {
  name: string;
  authorization: string;
  inFlight: number;
  secondaryRepeats: number;
  /** Units this replica may still spend on its own (shared budget unreachable), or undefined. */
  allowance: number | undefined;
  lastError: string | null;
  lastErrorAt: number | null;
}

/** Recent secondary-limit hits kept for the whole-upstream slowdown. */
const MAX_HITS = 64;
/** Retry-After when every token is dead: nothing comes back by itself. */
const ALL_DEAD_RETRY_AFTER_S = 60;

function newToken(configured: PoolToken): Token {
  return {
    ...UNSEEN,
    name: configured.name,
    authorization: `token ${configured.value}`,
    inFlight: 0,
    secondaryRepeats: 0,
    allowance: undefined,
    lastError: null,
    lastErrorAt: null,
  };
}

/** One pool's state: the functions below take it, so none of them is a closure over the others. */
interface Pool {
  readonly settings: PoolSettings;
  readonly now: () => number;
  readonly events: PoolEvents;
  readonly tokens: Token[];
  readonly byName: ReadonlyMap<string, Token>;
  /** Recent secondary limits (for the whole-upstream slowdown). */
  readonly hits: Array<{ at: number; token: string }>;
  readonly queue: WaitQueue;
  maxConcurrency: number;
  /** Leases in flight over every token. */
  total: number;
  closed: boolean;
  /** Bumped on every change of the numbers (the rate-limit memo's key). */
  version: number;
  rateMemo: { version: number; second: number; value: PoolRateLimit } | undefined;
}

function fail(token: Token, at: number, message: string): void {
  token.lastError = message;
  token.lastErrorAt = at;
}

/** Applies a settlement to the token, then tells the logs and metrics what newly went wrong. */
function apply(pool: Pool, token: Token, status: number, settlement: Settlement, at: number): void {
  const wasDead = token.dead;
  Object.assign(token, settle(token, settlement, at));
  if (settlement.verdict === 'dead' && !wasDead) {
    fail(token, at, `401 from upstream: token is invalid or revoked`);
    pool.events.dead?.(token.name);
  } else if (settlement.verdict === 'exhausted') {
    fail(token, at, `${status} from upstream: primary rate limit exhausted until ${new Date(token.reset * 1000).toISOString()}`);
    pool.events.exhausted?.(token.name, token.reset);
  } else if (settlement.verdict === 'secondary') {
    const pause = settlement.pauseUntil - at;
    pool.hits.push({ at, token: token.name });
    if (pool.hits.length > MAX_HITS) pool.hits.shift();
    fail(token, at, `${status} from upstream: secondary rate limit, paused for ${Math.ceil(pause / 1000)} s`);
    pool.events.secondary?.(token.name, pause);
  }
}

/** The numbers changed or a reservation came back: waiters may be served now. */
function changed(pool: Pool): void {
  pool.version++;
  pool.queue.pump();
}

function release(pool: Pool, token: Token): void {
  token.inFlight--;
  pool.total--;
  changed(pool);
}

function lease(pool: Pool, token: Token, switched: boolean): Lease {
  token.inFlight++;
  pool.total++;
  pool.version++;
  let done = false;
  return {
    name: token.name,
    authorization: token.authorization,
    switched,
    settle(status, header, body) {
      const at = pool.now();
      const verdict = classify(status, header, body, at);
      if (done) return verdict;
      done = true;
      const reaction = react(status, verdict, readRateLimit(header), token.secondaryRepeats, at);
      token.secondaryRepeats = reaction.repeats;
      apply(pool, token, status, reaction.settlement, at);
      if (token.allowance !== undefined) {
        if (status !== 304) token.allowance = Math.max(0, token.allowance - 1); // an authorised 304 is free
        token.remaining = Math.min(token.remaining, token.allowance);
      }
      release(pool, token);
      return verdict;
    },
    cancel() {
      if (done) return;
      done = true;
      release(pool, token);
    },
  };
}

function retryAfterSeconds(retryAt: number | undefined, at: number): number {
  return retryAt === undefined ? ALL_DEAD_RETRY_AFTER_S : Math.max(1, Math.ceil((retryAt - at) / 1000));
}

/**
 * The end of the earliest secondary-limit pause of a token that still has quota, when it is
 * within the queue timeout: worth waiting for (the upstream asked for a short pause, not a
 * new window). Quota exhaustion is never waited for: that answer is a 429 with Retry-After.
 */
function shortPauseEnd(pool: Pool, at: number, exclude: ReadonlySet<string> | undefined): number | undefined {
  let end: number | undefined;
  for (const token of pool.tokens) {
    if (token.dead || token.pausedUntil <= at || quotaLeft(token, token.pausedUntil) <= 0 || exclude?.has(token.name) === true) continue;
    if (end === undefined || token.pausedUntil < end) end = token.pausedUntil;
  }
  return end !== undefined && end - at <= pool.settings.queueTimeoutMs ? end : undefined;
}

/** A lease, an answer that none is coming, or a wait (until a reservation comes back, or until `until`). */
function attempt(pool: Pool, opts: AcquireOptions): Attempt {
  if (pool.closed) return busy();
  const at = pool.now();
  const maxInFlight = pool.settings.perTokenConcurrency;
  const choice = chooseToken({ tokens: pool.tokens, now: at, maxInFlight, prefer: opts.prefer, exclude: opts.exclude });
  if (choice.kind === 'wait') return choice;
  if (choice.kind === 'none') {
    const until = shortPauseEnd(pool, at, opts.exclude);
    if (until !== undefined) return { kind: 'wait', until };
    const reason = choice.retryAt === undefined ? 'dead' : 'exhausted';
    pool.events.rejected?.(reason);
    return { kind: 'unavailable', reason, retryAfterSeconds: retryAfterSeconds(choice.retryAt, at) };
  }
  if (pool.total >= upstreamConcurrency(pool.maxConcurrency, pool.hits, at)) return { kind: 'wait' };
  return { kind: 'lease', lease: lease(pool, pool.byName.get(choice.name)!, choice.switched) };
}

/** The pool as one quota, computed at most once a second between changes. */
function rateLimit(pool: Pool): PoolRateLimit {
  const at = pool.now();
  const second = Math.floor(at / 1000);
  const memo = pool.rateMemo;
  if (memo !== undefined && memo.version === pool.version && memo.second === second) return memo.value;
  const value = poolRateLimit(
    pool.tokens.filter((token) => token.known),
    at,
  );
  pool.rateMemo = { version: pool.version, second, value };
  return value;
}

function learn(pool: Pool, name: string, status: number, observation: RateObservation | undefined, error: string | undefined): void {
  const token = pool.byName.get(name);
  if (token === undefined) return;
  const at = pool.now();
  if (error !== undefined) fail(token, at, error);
  else if (status === 401)
    apply(pool, token, status, react(status, { kind: 'dead' }, undefined, token.secondaryRepeats, at).settlement, at);
  else Object.assign(token, observe(token, observation));
  changed(pool);
}

function sync(pool: Pool, name: string, view: TokenNumbers): void {
  const token = pool.byName.get(name);
  if (token === undefined) return;
  token.allowance = undefined;
  if (view.known) {
    token.limit = view.limit;
    token.remaining = Math.max(0, view.remaining);
    token.reset = view.reset;
    token.known = true;
  }
  token.pausedUntil = Math.max(token.pausedUntil, view.pausedUntil);
  if (view.dead && !token.dead) {
    token.dead = true;
    fail(token, pool.now(), '401 from upstream (seen by another replica): token is invalid or revoked');
  }
  changed(pool);
}

function scaleRemaining(pool: Pool, share: number): void {
  const at = pool.now();
  for (const token of pool.tokens) {
    if (!token.known) continue;
    // What is left now, minus what is already in flight here, split: then spent one by one.
    token.allowance = Math.max(0, Math.floor((quotaLeft(token, at) - token.inFlight) * share) + token.inFlight);
    token.remaining = Math.min(quotaLeft(token, at), token.allowance);
    if (windowOver(token, at)) token.reset = fallbackReset(at); // unknown new reset: assume soon
  }
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
    hits: [],
    queue: createWaitQueue({
      attempt: (opts) => attempt(pool, opts),
      timeoutMs: settings.queueTimeoutMs,
      maxQueue: settings.maxQueue,
      now,
      events,
    }),
    maxConcurrency: settings.maxConcurrency,
    total: 0,
    closed: false,
    version: 0,
    rateMemo: undefined,
  };
  return {
    names: tokens.map((token) => token.name),
    equivalent: settings.equivalent,
    acquire: (opts = {}) => pool.queue.acquire(opts),
    rateLimit: () => rateLimit(pool),
    snapshot() {
      const at = now();
      return tokens.map((token) => reportOf(token, at));
    },
    queueLength: () => pool.queue.length(),
    learn: (name, status, observation, error) => learn(pool, name, status, observation, error),
    authorizationOf: (name) => pool.byName.get(name)?.authorization,
    sync: (name, view) => sync(pool, name, view),
    setMaxConcurrency(max) {
      pool.maxConcurrency = Math.max(1, max);
      pool.queue.pump();
    },
    scaleRemaining: (share) => scaleRemaining(pool, share),
    inFlight: (name) => pool.byName.get(name)?.inFlight ?? 0,
    close() {
      pool.closed = true;
      pool.queue.close();
    },
  };
}
