/**
 * One upstream exchange on a pool token: take a lease, send with its Authorization, tell the pool
 * what came back, and try another token when the answer was the token's fault (401, primary or
 * secondary rate limit). Without a pool it is a plain `fetchBuffered`.
 */
import type { UpstreamClient } from '../upstream/client.js';
import { fetchBuffered, type Fetched } from '../upstream/fetch.js';
import { headerReader } from '../headers/value.js';
import type { PoolHeaders } from './pool-headers.js';
import { retryable } from './rate-limit.js';
import type { TokenPool, Unavailable } from './types.js';

/** The pool as the request path uses it: tokens to spend, and the headers consumers see. */
export interface PoolContext {
  readonly pool: TokenPool;
  readonly headers: PoolHeaders;
}

export type PooledFetched =
  | { kind: 'fetched'; f: Fetched; token: string | undefined; switched: boolean }
  | { kind: 'unavailable'; reason: Unavailable; retryAfterSeconds: number };

/** At most this many tokens are tried for one request. */
export const MAX_TOKEN_ATTEMPTS = 3;

interface Req {
  method: 'GET' | 'HEAD';
  path: string;
  headers: Record<string, string | string[]>;
}

export async function fetchPooled(
  client: UpstreamClient,
  req: Req,
  maxBytes: number,
  pool: TokenPool | undefined,
  prefer?: string,
): Promise<PooledFetched> {
  if (pool === undefined) return { kind: 'fetched', f: await fetchBuffered(client, req, maxBytes), token: undefined, switched: false };
  const tried = new Set<string>();
  let attempts = 0;
  for (;;) {
    const acquired = await pool.acquire({ prefer, exclude: tried });
    if (acquired.kind === 'unavailable') return acquired;
    const { lease } = acquired;
    const fetched = await fetchBuffered(client, { ...req, headers: { ...req.headers, authorization: lease.authorization } }, maxBytes);
    const switched = prefer !== undefined && lease.name !== prefer;
    if (fetched.kind === 'failed') {
      lease.cancel();
      return { kind: 'fetched', f: fetched, token: lease.name, switched };
    }
    const limited = fetched.kind === 'response' && (fetched.status === 403 || fetched.status === 429);
    const verdict = lease.settle(fetched.status, headerReader(fetched.headers), limited ? fetched.body.toString('utf8') : undefined);
    attempts++;
    if (fetched.kind === 'response' && retryable(verdict) && attempts < Math.min(MAX_TOKEN_ATTEMPTS, pool.names.length)) {
      // A dead or spent token is not tried again for this request. One paused by a secondary limit
      // is not chosen while paused, but may serve it once a short pause has been waited out.
      if (verdict.kind !== 'secondary') tried.add(lease.name);
      continue;
    }
    return { kind: 'fetched', f: fetched, token: lease.name, switched };
  }
}
