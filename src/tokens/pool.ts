/**
 * The token pool, in process: each token's learned state, reservations, the concurrency caps and
 * the bounded wait queue. Which token to use is decided by the pure `chooseToken` (choose.ts);
 * what an upstream answer means is decided by `classify` (rate-limit.ts). This module only keeps
 * the state and the queue, behind the `TokenPool` interface that a shared (Redis) pool can
 * implement later.
 *
 * Token values stay inside this module and the `authorization` of a lease; everything it reports
 * (snapshots, events) names tokens by their names.
 */
import { createHmac } from 'node:crypto';
import { chooseToken, quotaLeft, windowOver, type TokenState } from './choose.js';
import {
  classify,
  healthOf,
  mergeObservation,
  poolRateLimit,
  readRateLimit,
  secondaryPauseMs,
  upstreamConcurrency,
  type PoolRateLimit,
  type RateObservation,
  type TokenHealth,
  type Verdict,
} from './rate-limit.js';

export interface PoolToken {
  readonly name: string;
  readonly value: string;
}

type Header = (name: string) => string | undefined;

export interface Lease {
  readonly name: string;
  /** The Authorization header value to send upstream. */
  readonly authorization: string;
  /** A revalidation that could not use the token that stored the entry. */
  readonly switched: boolean;
  /** Records the upstream answer and frees the reservation; returns what it meant for the token. */
  settle(status: number, header: Header, body: string | undefined): Verdict;
  /** No answer came back (connection failure, too-large body): frees the reservation. */
  cancel(): void;
}

/**
 * exhausted: every token is spent or paused (answer 429 with Retry-After, or serve stale);
 * dead: every token was rejected by the upstream (503: the operator must replace them);
 * busy: no slot freed up within the queue timeout, or the queue is full (503).
 */
export type Unavailable = 'exhausted' | 'dead' | 'busy';

export type Acquired =
  | { kind: 'lease'; lease: Lease }
  | { kind: 'unavailable'; reason: Unavailable; retryAfterSeconds: number };

export interface AcquireOptions {
  prefer?: string | undefined;
  exclude?: ReadonlySet<string> | undefined;
}

export interface TokenReport {
  name: string;
  state: TokenHealth | 'unknown';
  limit: number | null;
  remaining: number | null;
  used: number | null;
  /** Epoch seconds. */
  reset: number | null;
  in_flight: number;
  paused_until: string | null;
  last_error: string | null;
  last_error_at: string | null;
}

export interface PoolEvents {
  dead?(name: string): void;
  exhausted?(name: string, reset: number): void;
  secondary?(name: string, pauseMs: number): void;
  rejected?(reason: 'exhausted' | 'dead' | 'queue_timeout' | 'queue_full'): void;
  queued?(waitedSeconds: number): void;
}

export interface PoolSettings {
  tokens: readonly PoolToken[];
  equivalent: boolean;
  perTokenConcurrency: number;
  maxConcurrency: number;
  queueTimeoutMs: number;
  maxQueue: number;
  events?: PoolEvents;
  now?: () => number;
}

export interface TokenPool {
  readonly names: readonly string[];
  readonly equivalent: boolean;
  acquire(opts?: AcquireOptions): Promise<Acquired>;
  /** The pool as one quota (what x-ratelimit-* tell consumers). */
  rateLimit(): PoolRateLimit;
  snapshot(): TokenReport[];
  queueLength(): number;
  /** Learns a token's numbers without spending (GET /rate_limit). */
  learn(name: string, status: number, observation: RateObservation | undefined, error?: string): void;
  authorizationOf(name: string): string | undefined;
  close(): void;
}

/** HMAC key for derived token names: fixed, so a token keeps its name across restarts and replicas. */
const NAME_KEY = 'etagere/token-name/v1';

/** A token's name: the configured one, or "tok-" plus 8 hex digits of a keyed hash of its value. */
export function tokenName(value: string, configured?: string): string {
  return configured ?? `tok-${createHmac('sha256', NAME_KEY).update(value).digest('hex').slice(0, 8)}`;
}

interface MutableToken {
  name: string;
  value: string;
  authorization: string;
  limit: number;
  remaining: number;
  reset: number;
  inFlight: number;
  dead: boolean;
  pausedUntil: number;
  known: boolean;
  secondaryRepeats: number;
  /** Units this replica may still spend on its own (shared budget unreachable), or undefined. */
  allowance: number | undefined;
  lastError: string | null;
  lastErrorAt: number | null;
}

interface Waiter {
  opts: AcquireOptions;
  since: number;
  timer: NodeJS.Timeout;
  resolve(a: Acquired): void;
}

const MAX_HITS = 64;

/** A token's numbers as another source (the shared budget in Redis) knows them. */
export interface SharedView {
  limit: number;
  /** Remaining quota minus what other replicas have reserved. */
  remaining: number;
  reset: number;
  pausedUntil: number;
  dead: boolean;
  known: boolean;
}

/** The in-process pool, plus the hooks a shared budget uses to keep it in line with Redis. */
export interface LocalTokenPool extends TokenPool {
  /** Overwrites a token's numbers with the shared view (a pause or death is never undone). */
  sync(name: string, view: SharedView): void;
  /** This replica's share of the whole-upstream concurrency cap. */
  setMaxConcurrency(n: number): void;
  /** Keeps only this share of every token's remaining quota (Redis outage: 1/N per replica). */
  scaleRemaining(share: number): void;
  /** Requests in flight on the token from this process. */
  inFlight(name: string): number;
}

export function createTokenPool(s: PoolSettings): LocalTokenPool {
  const now = s.now ?? Date.now;
  let maxConcurrency = s.maxConcurrency;
  const events = s.events ?? {};
  // A token never seen holds one unit: one request at a time learns its real numbers.
  const tokens: MutableToken[] = s.tokens.map((t) => ({
    name: t.name,
    value: t.value,
    authorization: `token ${t.value}`,
    limit: 1,
    remaining: 1,
    reset: 0,
    inFlight: 0,
    dead: false,
    pausedUntil: 0,
    known: false,
    secondaryRepeats: 0,
    allowance: undefined,
    lastError: null,
    lastErrorAt: null,
  }));
  const byName = new Map(tokens.map((t) => [t.name, t]));
  const queue: Waiter[] = [];
  const hits: Array<{ at: number; token: string }> = [];
  let total = 0;
  let closed = false;
  let version = 0;
  let rateMemo: { version: number; second: number; value: PoolRateLimit } | undefined;

  const fail = (t: MutableToken, at: number, message: string): void => {
    t.lastError = message;
    t.lastErrorAt = at;
  };

  const apply = (t: MutableToken, o: RateObservation | undefined): void => {
    if (o === undefined || o.resource !== 'core') return;
    const m = mergeObservation(t, o, t.known);
    t.limit = m.limit;
    t.remaining = m.remaining;
    t.reset = m.reset;
    t.known = true;
  };

  const react = (t: MutableToken, status: number, v: Verdict, at: number): void => {
    switch (v.kind) {
      case 'ok':
        if (status < 400) t.secondaryRepeats = 0;
        return;
      case 'dead':
        if (!t.dead) {
          t.dead = true;
          fail(t, at, `401 from upstream: token is invalid or revoked`);
          events.dead?.(t.name);
        }
        return;
      case 'exhausted': {
        t.remaining = 0;
        if (v.reset !== undefined && v.reset > t.reset) t.reset = v.reset;
        if (t.reset * 1000 <= at) t.reset = Math.ceil(at / 1000) + 60; // no usable reset given
        t.known = true;
        fail(t, at, `${status} from upstream: primary rate limit exhausted until ${new Date(t.reset * 1000).toISOString()}`);
        events.exhausted?.(t.name, t.reset);
        return;
      }
      case 'secondary': {
        t.secondaryRepeats++;
        const pause = secondaryPauseMs(v.retryAfterMs, t.secondaryRepeats);
        t.pausedUntil = Math.max(t.pausedUntil, at + pause);
        hits.push({ at, token: t.name });
        if (hits.length > MAX_HITS) hits.shift();
        fail(t, at, `${status} from upstream: secondary rate limit, paused for ${Math.ceil(pause / 1000)} s`);
        events.secondary?.(t.name, pause);
        return;
      }
    }
  };

  const release = (t: MutableToken): void => {
    t.inFlight--;
    total--;
    version++;
    pump();
  };

  const lease = (t: MutableToken, switched: boolean): Lease => {
    t.inFlight++;
    total++;
    version++;
    let done = false;
    return {
      name: t.name,
      authorization: t.authorization,
      switched,
      settle(status, header, body) {
        const at = now();
        const v = classify(status, header, body, at);
        if (done) return v;
        done = true;
        apply(t, readRateLimit(header));
        if (t.allowance !== undefined) {
          if (status !== 304) t.allowance = Math.max(0, t.allowance - 1); // an authorised 304 is free
          t.remaining = Math.min(t.remaining, t.allowance);
        }
        react(t, status, v, at);
        release(t);
        return v;
      },
      cancel() {
        if (done) return;
        done = true;
        release(t);
      },
    };
  };

  const retryAfterSeconds = (retryAt: number | undefined, at: number): number =>
    retryAt === undefined ? 60 : Math.max(1, Math.ceil((retryAt - at) / 1000));

  /**
   * The end of the earliest secondary-limit pause of a token that still has quota, when it is
   * within the queue timeout: worth waiting for (the upstream asked for a short pause, not a
   * new window). Quota exhaustion is never waited for: that answer is a 429 with Retry-After.
   */
  const shortPauseEnd = (at: number, exclude: ReadonlySet<string> | undefined): number | undefined => {
    let end: number | undefined;
    for (const t of tokens) {
      if (t.dead || t.pausedUntil <= at || quotaLeft(t, t.pausedUntil) <= 0 || exclude?.has(t.name) === true) continue;
      if (end === undefined || t.pausedUntil < end) end = t.pausedUntil;
    }
    return end !== undefined && end - at <= s.queueTimeoutMs ? end : undefined;
  };

  /** A lease, an answer that none is coming, or a wait (until a reservation comes back, or until `until`). */
  const attempt = (opts: AcquireOptions): Acquired | { kind: 'wait'; until?: number } => {
    if (closed) return { kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 };
    const at = now();
    const c = chooseToken({ tokens, now: at, maxInFlight: s.perTokenConcurrency, prefer: opts.prefer, exclude: opts.exclude });
    if (c.kind === 'wait') return c;
    if (c.kind === 'none') {
      const until = shortPauseEnd(at, opts.exclude);
      if (until !== undefined) return { kind: 'wait', until };
      const reason = c.retryAt === undefined ? 'dead' : 'exhausted';
      events.rejected?.(reason);
      return { kind: 'unavailable', reason, retryAfterSeconds: retryAfterSeconds(c.retryAt, at) };
    }
    if (total >= upstreamConcurrency(maxConcurrency, hits, at)) return { kind: 'wait' };
    return { kind: 'lease', lease: lease(byName.get(c.name)!, c.switched) };
  };

  let wake: { at: number; timer: NodeJS.Timeout } | undefined;
  /** Pumps the queue again at `at` (a pause ends), keeping only the earliest such timer. */
  const wakeAt = (at: number): void => {
    if (wake !== undefined && wake.at <= at) return;
    if (wake !== undefined) clearTimeout(wake.timer);
    const timer = setTimeout(() => {
      wake = undefined;
      pump();
    }, Math.max(0, at - now()) + 1);
    timer.unref();
    wake = { at, timer };
  };

  const pump = (): void => {
    while (queue.length > 0) {
      const w = queue[0]!;
      const r = attempt(w.opts);
      if (r.kind === 'wait') {
        if (r.until !== undefined) wakeAt(r.until);
        return;
      }
      queue.shift();
      clearTimeout(w.timer);
      events.queued?.((now() - w.since) / 1000);
      w.resolve(r);
    }
  };

  const snapshotOf = (t: MutableToken, at: number): TokenReport => {
    const left = t.known ? Math.max(0, quotaLeft(t, at)) : null;
    return {
      name: t.name,
      state: t.known || t.dead || t.pausedUntil > at ? healthOf(t, at) : 'unknown',
      limit: t.known ? t.limit : null,
      remaining: left,
      used: left === null ? null : t.limit - left,
      reset: t.known ? t.reset : null,
      in_flight: t.inFlight,
      paused_until: t.pausedUntil > at ? new Date(t.pausedUntil).toISOString() : null,
      last_error: t.lastError,
      last_error_at: t.lastErrorAt === null ? null : new Date(t.lastErrorAt).toISOString(),
    };
  };

  return {
    names: tokens.map((t) => t.name),
    equivalent: s.equivalent,
    acquire(opts = {}) {
      const r = attempt(opts);
      if (r.kind !== 'wait') return Promise.resolve(r);
      if (queue.length >= s.maxQueue || s.queueTimeoutMs === 0) {
        events.rejected?.('queue_full');
        return Promise.resolve({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
      }
      return new Promise<Acquired>((resolve) => {
        const w: Waiter = {
          opts,
          since: now(),
          resolve,
          timer: setTimeout(() => {
            const i = queue.indexOf(w);
            if (i >= 0) queue.splice(i, 1);
            events.rejected?.('queue_timeout');
            resolve({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
          }, s.queueTimeoutMs),
        };
        w.timer.unref();
        queue.push(w);
        if (r.until !== undefined) wakeAt(r.until);
      });
    },
    rateLimit() {
      const at = now();
      const second = Math.floor(at / 1000);
      if (rateMemo !== undefined && rateMemo.version === version && rateMemo.second === second) return rateMemo.value;
      const value = poolRateLimit(tokens.filter((t) => t.known), at);
      rateMemo = { version, second, value };
      return value;
    },
    snapshot() {
      const at = now();
      return tokens.map((t) => snapshotOf(t, at));
    },
    queueLength: () => queue.length,
    learn(name, status, observation, error) {
      const t = byName.get(name);
      if (t === undefined) return;
      const at = now();
      if (error !== undefined) fail(t, at, error);
      else if (status === 401) react(t, status, { kind: 'dead' }, at);
      else apply(t, observation);
      version++;
      pump();
    },
    authorizationOf: (name) => byName.get(name)?.authorization,
    sync(name, view) {
      const t = byName.get(name);
      if (t === undefined) return;
      t.allowance = undefined;
      if (view.known) {
        t.limit = view.limit;
        t.remaining = Math.max(0, view.remaining);
        t.reset = view.reset;
        t.known = true;
      }
      t.pausedUntil = Math.max(t.pausedUntil, view.pausedUntil);
      if (view.dead && !t.dead) {
        t.dead = true;
        fail(t, now(), '401 from upstream (seen by another replica): token is invalid or revoked');
      }
      version++;
      pump();
    },
    setMaxConcurrency(n) {
      maxConcurrency = Math.max(1, n);
      pump();
    },
    scaleRemaining(share) {
      const at = now();
      for (const t of tokens) {
        if (!t.known) continue;
        // What is left now, minus what is already in flight here, split: then spent one by one.
        t.allowance = Math.max(0, Math.floor((quotaLeft(t, at) - t.inFlight) * share) + t.inFlight);
        t.remaining = Math.min(quotaLeft(t, at), t.allowance);
        if (windowOver(t, at)) t.reset = Math.ceil(at / 1000) + 60; // unknown new reset: assume soon
      }
      version++;
    },
    inFlight: (name) => byName.get(name)?.inFlight ?? 0,
    close() {
      closed = true;
      if (wake !== undefined) clearTimeout(wake.timer);
      for (const w of queue.splice(0)) {
        clearTimeout(w.timer);
        w.resolve({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
      }
    },
  };
}

/** Reads GET /rate_limit's body into the core observation (GitHub's shape: resources.core). */
export function rateLimitFromBody(body: string): RateObservation | undefined {
  try {
    const parsed = JSON.parse(body) as { resources?: { core?: Record<string, unknown> }; rate?: Record<string, unknown> };
    const core = parsed.resources?.core ?? parsed.rate;
    if (core === undefined) return undefined;
    const { limit, remaining, reset } = core;
    if (typeof limit !== 'number' || typeof remaining !== 'number' || typeof reset !== 'number') return undefined;
    return { limit, remaining: Math.min(remaining, limit), reset, resource: 'core' };
  } catch {
    return undefined;
  }
}

export type { TokenState };
