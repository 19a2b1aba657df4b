/**
 * The x-ratelimit-* headers pool consumers see: the pool as one quota (sum of limits and of
 * remaining, earliest reset), plus x-etagere-token with the name of the token that fetched the
 * response. Built once per change of the pool's numbers, not per request.
 */
import { basePrefixOf } from '../upstream/client.js';
import type { PoolRateLimit, TokenPool } from './types.js';

export const TOKEN_HEADER = 'x-etagere-token';

export function isRateLimitHeader(name: string): boolean {
  return name.startsWith('x-ratelimit-');
}

export interface PoolHeaders {
  /** [name, value, ...] for a stored entry sent to a pool consumer. */
  flat(token: string | undefined): readonly string[];
  /** The pool's x-ratelimit-* as a record (error answers). */
  record(): Record<string, string>;
  /** Replaces the upstream's x-ratelimit-* of a streamed answer with the pool's. */
  apply(out: Record<string, string | string[] | undefined>, token: string | undefined): void;
}

function pairs(rl: PoolRateLimit): string[] {
  // prettier-ignore
  return [
    'x-ratelimit-limit', String(rl.limit),
    'x-ratelimit-remaining', String(rl.remaining),
    'x-ratelimit-used', String(rl.used),
    'x-ratelimit-reset', String(rl.reset),
    'x-ratelimit-resource', 'core',
  ];
}

export function createPoolHeaders(pool: TokenPool): PoolHeaders {
  let seen: PoolRateLimit | undefined;
  let base: string[] = [];
  const byToken = new Map<string, readonly string[]>();
  const current = (): string[] => {
    const rl = pool.rateLimit();
    if (rl !== seen) {
      seen = rl;
      base = pairs(rl);
      byToken.clear();
    }
    return base;
  };
  return {
    flat(token) {
      const headerPairs = current();
      if (token === undefined) return headerPairs;
      let withToken = byToken.get(token);
      if (withToken === undefined) {
        withToken = headerPairs.concat(TOKEN_HEADER, token);
        byToken.set(token, withToken);
      }
      return withToken;
    },
    record() {
      const headerPairs = current();
      const out: Record<string, string> = {};
      for (let i = 0; i < headerPairs.length; i += 2) out[headerPairs[i]!] = headerPairs[i + 1]!;
      return out;
    },
    apply(out, token) {
      for (const name of Object.keys(out)) if (isRateLimitHeader(name)) delete out[name];
      Object.assign(out, this.record());
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

/**
 * The answer to GET /rate_limit for a pool consumer: the pool as one quota, in GitHub's shape, so
 * clients that pace themselves by it (Octokit's throttling, scripts) see what they may spend.
 */
export function poolRateLimitBody(headers: PoolHeaders, rl: PoolRateLimit): { headers: Record<string, string>; body: Buffer } {
  const core = { limit: rl.limit, used: rl.used, remaining: rl.remaining, reset: rl.reset, resource: 'core' };
  const body = Buffer.from(JSON.stringify({ resources: { core }, rate: core }));
  return { headers: { ...headers.record(), 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-cache' }, body };
}
