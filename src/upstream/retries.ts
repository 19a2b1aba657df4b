/**
 * The retry state of one upstream client: its budget (the rules below) over the requests it sent,
 * and the decision after each attempt. One instance per upstream client, no shared state: each
 * replica (and each cluster worker) budgets its own traffic.
 */

/** What became of a transit failure: sent again, or not for lack of budget (counted by the caller's observer). */
export type RetryOutcome = 'retried' | 'budget_exhausted';
export type RetryObserver = (reason: TransitReason, outcome: RetryOutcome) => void;

export type RetryDecision = { readonly kind: 'retry'; readonly delayMs: number } | { readonly kind: 'stop' };

const STOP: RetryDecision = { kind: 'stop' };

export class Retries {
  private state: BudgetState;

  /**
   * `max`: retries per request (`upstreams[].retries`, 0: never). `now` and `random` are
   * injectable for tests.
   */
  constructor(
    readonly max: number,
    private readonly observe: RetryObserver = () => undefined,
    private readonly now: () => number = Date.now,
    private readonly random: () => number = Math.random,
  ) {
    this.state = emptyBudget(now());
  }

  /** An upstream request (first attempt or retry) is going out. */
  sent(): void {
    this.state = countRequest(rolled(this.state, this.now()));
  }

  /**
   * After an attempt of a `method` request that `retried` retries came before, which ended with
   * transit failure `reason` (undefined: none): send it again after `delayMs`, or stop.
   */
  decide(method: string, retried: number, reason: TransitReason | undefined): RetryDecision {
    if (reason === undefined || !idempotent(method) || retried >= this.max) return STOP;
    const now = this.now();
    const state = rolled(this.state, now);
    if (!budgetAllows(state, now)) {
      this.state = state;
      this.observe(reason, 'budget_exhausted');
      return STOP;
    }
    this.state = countRetry(state);
    this.observe(reason, 'retried');
    return { kind: 'retry', delayMs: backoffMs(this.random()) };
  }
}

/*
 * Retries in transit, as pure rules: which upstream outcomes a GET or HEAD is sent again for (the
 * connection failed before any response byte, or a 502/503/504 without Retry-After), how long to
 * wait first (full jitter), and the budget that keeps retries to a share of recent requests so that
 * an upstream in trouble never sees a retry storm. retries.ts holds the state; docs/caching.md
 * ("Retries") describes the behaviour.
 */
/** Why a request is sent again: the metric label of etagere_upstream_retries_total. */
export const TRANSIT_REASONS = ['reset', 'refused', 'timeout', 'status_502', 'status_503', 'status_504'] as const;
export type TransitReason = (typeof TRANSIT_REASONS)[number];

/**
 * Error codes of a connection that failed before the response head arrived. A reset or closed
 * socket (undici: UND_ERR_SOCKET) and a refused connect are safe to retry for an idempotent
 * method; so is a connect or headers timeout. A body timeout or a body cut short is not: bytes of
 * the answer came (the caller never asks about those).
 */
const ERROR_REASONS: Readonly<Record<string, TransitReason>> = {
  ECONNRESET: 'reset',
  EPIPE: 'reset',
  UND_ERR_SOCKET: 'reset',
  ECONNREFUSED: 'refused',
  UND_ERR_CONNECT_TIMEOUT: 'timeout',
  UND_ERR_HEADERS_TIMEOUT: 'timeout',
  ETIMEDOUT: 'timeout',
};

/** The retry reason of an error code thrown before any response byte, or undefined (not retried). */
export function transitOfError(code: string): TransitReason | undefined {
  return Object.hasOwn(ERROR_REASONS, code) ? ERROR_REASONS[code] : undefined;
}

/** The response headers the status rule reads. */
export type StatusHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** Cache-Control freshness directives: an answer that carries one was meant to be kept. */
const EXPLICIT_FRESHNESS = /(?:^|[\s,])(?:max-age|s-maxage)\s*=/i;

/**
 * The retry reason of an answer's status: a 502, 503 or 504 without Retry-After (with one, the
 * upstream said when to come back, and the client hears it) nor explicit freshness (Cache-Control
 * max-age or s-maxage, Expires: a deliberate answer, to be cached as it is). Rate-limit answers
 * (403, 429) are never a transit failure: the token pool deals with them (src/pool/rules/rate-limit.ts).
 */
export function transitOfStatus(status: number, headers: StatusHeaders): TransitReason | undefined {
  if (status !== 502 && status !== 503 && status !== 504) return undefined;
  if (headers['retry-after'] !== undefined || headers.expires !== undefined) return undefined;
  const cacheControl = headers['cache-control'];
  if (cacheControl !== undefined && EXPLICIT_FRESHNESS.test(String(cacheControl))) return undefined;
  if (status === 502) return 'status_502';
  if (status === 503) return 'status_503';
  if (status === 504) return 'status_504';
  return undefined;
}

/** Only GET and HEAD are retried: GraphQL's POST (and anything passed through) goes once. */
export const idempotent = (method: string): boolean => method === 'GET' || method === 'HEAD';

/** The wait before a retry: full jitter between these bounds (ms). */
export const BACKOFF_MIN_MS = 50;
export const BACKOFF_MAX_MS = 250;

/** The backoff for a uniform `random` in [0, 1): within [BACKOFF_MIN_MS, BACKOFF_MAX_MS). */
export function backoffMs(random: number): number {
  const draw = Number.isFinite(random) ? Math.min(Math.max(random, 0), 0.999_999) : 0;
  return Math.floor(BACKOFF_MIN_MS + draw * (BACKOFF_MAX_MS - BACKOFF_MIN_MS));
}

/**
 * The retry budget: retries may be at most `ratio` of the requests of the last `windowMs` (a
 * sliding window over two fixed ones, the previous one weighted by how much of it still
 * overlaps), but `minRetries` are always allowed so that low traffic still retries.
 */
export interface BudgetSettings {
  readonly ratio: number;
  readonly minRetries: number;
  readonly windowMs: number;
}

export const RETRY_BUDGET: BudgetSettings = { ratio: 0.1, minRetries: 3, windowMs: 10_000 };

/** Upstream requests (retries among them) and retries, in the current window and the one before it. */
export interface BudgetState {
  readonly windowStart: number;
  readonly requests: number;
  readonly retries: number;
  readonly prevRequests: number;
  readonly prevRetries: number;
}

export const emptyBudget = (now: number): BudgetState => ({ windowStart: now, requests: 0, retries: 0, prevRequests: 0, prevRetries: 0 });

/** The state moved on to the window that holds `now`. */
export function rolled(state: BudgetState, now: number, settings: BudgetSettings = RETRY_BUDGET): BudgetState {
  const elapsed = now - state.windowStart;
  if (elapsed < settings.windowMs) return state;
  // One window on: the current becomes the previous; more than one: both are past.
  if (elapsed < 2 * settings.windowMs)
    return {
      windowStart: state.windowStart + settings.windowMs,
      requests: 0,
      retries: 0,
      prevRequests: state.requests,
      prevRetries: state.retries,
    };
  return emptyBudget(now);
}

/** Whether one more retry fits the budget at `now` (given a rolled state). */
export function budgetAllows(state: BudgetState, now: number, settings: BudgetSettings = RETRY_BUDGET): boolean {
  const overlap = Math.max(0, 1 - (now - state.windowStart) / settings.windowMs);
  const retries = state.retries + state.prevRetries * overlap;
  // The share is of first attempts: retries are requests too, but not the ones budgeted for.
  const requests = state.requests + state.prevRequests * overlap - retries;
  return retries + 1 <= Math.max(settings.minRetries, settings.ratio * requests);
}

export const countRequest = (state: BudgetState): BudgetState => ({ ...state, requests: state.requests + 1 });
export const countRetry = (state: BudgetState): BudgetState => ({ ...state, retries: state.retries + 1 });
