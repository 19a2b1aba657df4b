/**
 * What the pool tells the outside, built from its tokens' numbers: each token's report (the
 * /admin/tokens rows and the pool gauges) and the pool as one quota (the x-ratelimit-* headers
 * and GET /rate_limit answer pool consumers see), and the x-ratelimit-* headers built from it. Pure.
 */
import { hasQuota, quotaLeft, RESET_GRACE_MS, windowOver } from './state.js';
import { type Resource, RATE_LIMITING_OFF_DOCS_URL, RATE_LIMITING_OFF_MESSAGE, RESOURCES } from './rate-limit.js';
import type { PoolRateLimit, ResourceReport, TokenHealth, TokenNumbers, TokenReport, TokenState, TokenPool } from './types.js';
import { describesToken, isRateLimitHeader } from '../../http/headers/hop-by-hop.js';
import { basePrefixOf } from '../../http/route.js';

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

/*
 * The x-ratelimit-* headers pool consumers see: the pool as one quota in the request's rate-limit
 * resource (sum of limits and of remaining, earliest reset; `x-ratelimit-resource` names it), plus
 * x-etagere-token with the name of the token that fetched the response. Built once per change of
 * the pool's numbers, not per request. `forResource(resource)` gives the headers of one resource
 * (core by default), so replies built from a PoolHeaders need not know the resource.
 *
 * A pool with an unlimited token (GitHub Enterprise Server with rate limiting off, state.ts) has no
 * quota to tell: consumers get no x-ratelimit-* at all, as GHES itself sends none (zeros would make
 * clients that check `remaining` first, such as go-github, refuse to send), and GET /rate_limit
 * answers GHES's own 404 "Rate limiting is not enabled.", which GitHub clients know.
 */
export const TOKEN_HEADER = 'x-etagere-token';

export interface PoolHeaders {
  /** The resource these headers describe (core unless made by `forResource`). */
  readonly resource: Resource;
  /** [name, value, ...] for a stored entry sent to a pool consumer (of another resource when given). */
  flat(token: string | undefined, resource?: Resource): readonly string[];
  /** The pool's x-ratelimit-* as a record (error answers). */
  record(resource?: Resource): Record<string, string>;
  /** Replaces the upstream's x-ratelimit-* of a streamed answer with the pool's; drops the token's scopes and expiry. */
  apply(out: Record<string, string | string[] | undefined>, token: string | undefined, resource?: Resource): void;
  /** The same headers for requests in `resource` (memoized: one object per resource). */
  forResource(resource: Resource): PoolHeaders;
}

function pairs(rl: PoolRateLimit, resource: Resource): string[] {
  if (rl.unlimited === true) return [];
  // prettier-ignore
  return [
    'x-ratelimit-limit', String(rl.limit),
    'x-ratelimit-remaining', String(rl.remaining),
    'x-ratelimit-used', String(rl.used),
    'x-ratelimit-reset', String(rl.reset),
    'x-ratelimit-resource', resource,
  ];
}

export function createPoolHeaders(pool: TokenPool): PoolHeaders {
  const views = new Map<Resource, PoolHeaders>();
  const forResource = (resource: Resource): PoolHeaders => {
    let view = views.get(resource);
    if (view === undefined) {
      view = headersOf(pool, resource, forResource);
      views.set(resource, view);
    }
    return view;
  };
  return forResource('core');
}

/** The headers of one resource; `forResource` hands out the others. */
function headersOf(pool: TokenPool, resource: Resource, forResource: (resource: Resource) => PoolHeaders): PoolHeaders {
  let seen: PoolRateLimit | undefined;
  let base: string[] = [];
  const byToken = new Map<string, readonly string[]>();
  const current = (): string[] => {
    const rl = pool.rateLimit(resource);
    if (rl !== seen) {
      seen = rl;
      base = pairs(rl, resource);
      byToken.clear();
    }
    return base;
  };
  return {
    resource,
    forResource,
    flat(token, other) {
      if (other !== undefined && other !== resource) return forResource(other).flat(token);
      const headerPairs = current();
      if (token === undefined) return headerPairs;
      let withToken = byToken.get(token);
      if (withToken === undefined) {
        withToken = headerPairs.concat(TOKEN_HEADER, token);
        byToken.set(token, withToken);
      }
      return withToken;
    },
    record(other) {
      if (other !== undefined && other !== resource) return forResource(other).record();
      const headerPairs = current();
      const out: Record<string, string> = {};
      for (let i = 0; i < headerPairs.length; i += 2) out[headerPairs[i]!] = headerPairs[i + 1]!;
      return out;
    },
    apply(out, token, other) {
      // The token's own numbers, scopes and expiry are the pool's business, not the consumer's.
      for (const name of Object.keys(out)) if (isRateLimitHeader(name) || describesToken(name)) delete out[name];
      Object.assign(out, this.record(other));
      if (token !== undefined) out[TOKEN_HEADER] = token;
    },
  };
}

/** Whether an upstream path (with its query) is GitHub's GET /rate_limit under `basePath`. */
export function isRateLimitPath(path: string, basePath: string): boolean {
  const query = path.indexOf('?');
  const pathOnly = query === -1 ? path : path.slice(0, query);
  return pathOnly === `${basePrefixOf(basePath)}/rate_limit`;
}

/** GET /rate_limit's answer when the pool is unlimited: GitHub Enterprise Server's own, with rate limiting off. */
function rateLimitingOffBody(): { status: number; headers: Record<string, string>; body: Buffer } {
  const body = Buffer.from(JSON.stringify({ message: RATE_LIMITING_OFF_MESSAGE, documentation_url: RATE_LIMITING_OFF_DOCS_URL }));
  return { status: 404, headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-cache' }, body };
}

/**
 * The answer to GET /rate_limit for a pool consumer: the pool as one quota in every resource
 * (`pool.rateLimits()`; or core alone), in GitHub's shape, so clients that pace themselves by it
 * (Octokit's throttling, scripts) see what they may spend; or, when the pool is unlimited, the 404
 * of rate limiting off.
 */
export function poolRateLimitBody(
  headers: PoolHeaders,
  limits: PoolRateLimit | Partial<Record<Resource, PoolRateLimit>>,
): { status: number; headers: Record<string, string>; body: Buffer } {
  const byResource: Partial<Record<Resource, PoolRateLimit>> = 'limit' in limits ? { core: limits as PoolRateLimit } : limits;
  if (byResource.core?.unlimited === true) return rateLimitingOffBody();
  const resources: Record<string, { limit: number; used: number; remaining: number; reset: number; resource: string }> = {};
  for (const resource of RESOURCES) {
    const rl = byResource[resource];
    if (rl !== undefined) resources[resource] = { limit: rl.limit, used: rl.used, remaining: rl.remaining, reset: rl.reset, resource };
  }
  const core = resources.core ?? { limit: 0, used: 0, remaining: 0, reset: Math.ceil(Date.now() / 1000), resource: 'core' };
  const body = Buffer.from(JSON.stringify({ resources: { ...resources, core }, rate: core }));
  return {
    status: 200,
    headers: { ...headers.record('core'), 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-cache' },
    body,
  };
}
