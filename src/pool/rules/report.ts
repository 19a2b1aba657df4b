/**
 * What the pool tells the outside, built from its tokens' numbers: each token's report (the
 * /admin/tokens rows and the pool gauges) and the pool as one quota (the x-ratelimit-* headers
 * and GET /rate_limit answer pool consumers see). Pure.
 */
import { hasQuota, quotaLeft, RESET_GRACE_MS, windowOver } from './state.js';
import type { Resource } from './resource.js';
import type { PoolRateLimit, ResourceReport, TokenHealth, TokenNumbers, TokenReport, TokenState } from './types.js';

export function healthOf(token: TokenState, nowMs: number): TokenHealth {
  if (token.dead) return 'dead';
  if (token.pausedUntil > nowMs) return 'paused';
  return hasQuota(token, nowMs) ? 'ok' : 'exhausted';
}

/**
 * The pool as one quota, as consumers see it in x-ratelimit-*: the sums of limits and remaining
 * over live tokens (limit = remaining + used), and the earliest reset. Paused tokens count with
 * their quota (it comes back); dead ones not at all. Unlimited tokens have no numbers to add: one
 * live unlimited token makes the pool `unlimited` (it always has a token that costs no quota).
 */
export function poolRateLimit(tokens: readonly TokenState[], nowMs: number): PoolRateLimit {
  let limit = 0;
  let remaining = 0;
  let reset = Number.POSITIVE_INFINITY;
  let unlimited = false;
  for (const token of tokens) {
    if (token.dead) continue;
    if (token.unlimited === true) {
      unlimited = true;
      continue;
    }
    limit += token.limit;
    remaining += Math.max(0, quotaLeft(token, nowMs));
    const tokenReset = windowOver(token, nowMs) ? Math.ceil((nowMs + RESET_GRACE_MS) / 1000) : token.reset;
    if (tokenReset < reset) reset = tokenReset;
  }
  if (!Number.isFinite(reset)) reset = Math.ceil(nowMs / 1000);
  remaining = Math.min(remaining, limit);
  return unlimited ? { limit, remaining, used: limit - remaining, reset, unlimited } : { limit, remaining, used: limit - remaining, reset };
}

/** A token as the pool keeps it: its numbers, its reservations and the last error it met. */
export interface ReportedToken extends Omit<TokenState, 'unlimited'>, TokenNumbers {
  readonly lastError: string | null;
  /** Epoch ms. */
  readonly lastErrorAt: number | null;
}

/** One resource's numbers of a token (a window that is over holds its whole limit again), and its local allowance if any. */
export function resourceReport(
  window: Pick<TokenNumbers, 'limit' | 'remaining' | 'reset'> & { allowance?: number | undefined },
  nowMs: number,
): ResourceReport {
  const left = Math.max(0, quotaLeft(window, nowMs));
  const report: ResourceReport = { limit: window.limit, remaining: left, used: window.limit - left, reset: window.reset };
  const allowance = allowanceLeft(window, nowMs);
  if (allowance !== null) report.local_allowance = allowance;
  return report;
}

/**
 * What a local allowance (Redis outage) still lets this replica spend: never more than the window
 * holds; null without one, or once the window renewed (the allowance was of the old one).
 */
export function allowanceLeft(
  window: Pick<TokenNumbers, 'remaining' | 'reset'> & { allowance?: number | undefined },
  nowMs: number,
): number | null {
  if (window.allowance === undefined || windowOver(window, nowMs)) return null;
  return Math.max(0, Math.min(window.allowance, window.remaining));
}

/**
 * One token's row: numbers (core's) only once learnt, the state 'unknown' until something is
 * known, and the numbers of every resource learnt so far. An unlimited token is known (its state
 * is its health) and has no numbers.
 */
export function reportOf(
  token: ReportedToken,
  nowMs: number,
  resources: Partial<Record<Resource, ResourceReport>> = {},
  localAllowance: number | null = null,
): TokenReport {
  const numbered = token.known && !token.unlimited;
  const left = numbered ? Math.max(0, quotaLeft(token, nowMs)) : null;
  const seen = token.known || token.unlimited || token.dead || token.pausedUntil > nowMs;
  return {
    name: token.name,
    state: seen ? healthOf(token, nowMs) : 'unknown',
    limit: numbered ? token.limit : null,
    remaining: left,
    used: left === null ? null : token.limit - left,
    reset: numbered ? token.reset : null,
    in_flight: token.inFlight,
    paused_until: token.pausedUntil > nowMs ? new Date(token.pausedUntil).toISOString() : null,
    last_error: token.lastError,
    last_error_at: token.lastErrorAt === null ? null : new Date(token.lastErrorAt).toISOString(),
    resources,
    unlimited: token.unlimited,
    scopes: null,
    scopes_from: 'unseen',
    local_allowance: numbered ? localAllowance : null,
  };
}

/** The row of a token nothing is known about yet (a worker before the primary's first state). */
export function unknownReport(name: string): TokenReport {
  return {
    name,
    state: 'unknown',
    limit: null,
    remaining: null,
    used: null,
    reset: null,
    in_flight: 0,
    paused_until: null,
    last_error: null,
    last_error_at: null,
    resources: {},
    unlimited: false,
    scopes: null,
    scopes_from: 'unseen',
    local_allowance: null,
  };
}
