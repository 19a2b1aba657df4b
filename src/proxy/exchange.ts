/**
 * One upstream exchange for the cache: the client's end-to-end headers minus those the cache owns,
 * the stored entry's validators, a pool token when the request uses the pool (the token that
 * stored the entry first: its ETag only matches that credential), then counted and logged.
 */
import type { Got } from '../cache/classify.js';
import { encodeFetchedBy, poolTokenOf, type CacheEntry, type FetchedBy } from '../cache/entry.js';
import type { Partitioner } from '../cache/key.js';
import { requestHeadersForUpstream } from '../headers/hop-by-hop.js';
import type { Logger } from '../log/logger.js';
import type { Metrics } from '../metrics/registry.js';
import type { RequestContext } from './context.js';
import { consumerOf, fetchPooled, type PoolContext } from '../tokens/pooled-fetch.js';

/** Request headers never forwarded on cached fetches: the cache sets its own validators. */
const CACHE_OWNED = [
  'if-none-match',
  'if-modified-since',
  'if-match',
  'if-unmodified-since',
  'if-range',
  'range',
  'cache-control',
  'pragma',
  'accept-encoding',
];

export type UpstreamExchange = (ctx: RequestContext, stale: CacheEntry | undefined) => Promise<Got>;

export interface ExchangeDeps {
  readonly pool: PoolContext | undefined;
  readonly partitioner: Partitioner;
  readonly maxEntryBytes: number;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

export function createUpstreamExchange({ pool, partitioner, maxEntryBytes, metrics, logger }: ExchangeDeps): UpstreamExchange {
  const fetcher = (token: string | undefined, authorization: string | undefined): FetchedBy => {
    if (token !== undefined) return { kind: 'pool', token };
    return authorization === undefined ? { kind: 'anonymous' } : { kind: 'credential', id: partitioner.credentialId(authorization) };
  };

  return async (ctx, stale) => {
    const headers = requestHeadersForUpstream(ctx.req.headers, ctx.cred.kind === 'pool');
    for (const name of CACHE_OWNED) delete headers[name];
    headers['x-request-id'] = ctx.id;
    if (stale?.etag !== undefined) headers['if-none-match'] = stale.etag;
    else if (stale?.lastModified !== undefined) headers['if-modified-since'] = stale.lastModified;

    const tokens = ctx.cred.kind === 'pool' ? pool?.pool : undefined;
    const request = { method: 'GET' as const, path: ctx.path, headers };
    const prefer = poolTokenOf(stale?.fetchedBy);
    const pooled = await fetchPooled(ctx.upstream.client, request, maxEntryBytes, tokens, prefer, consumerOf(pool, ctx.cred));
    if (pooled.kind === 'unavailable') return pooled;
    const { f: fetched, token } = pooled;
    if (pooled.switched) metrics.tokenSwitchRevalidations.inc();
    const seconds = fetched.kind === 'response' ? (fetched.responseTime - fetched.requestTime) / 1000 : undefined;
    metrics.countUpstream(ctx.upstream.cfg.name, ctx.route, fetched.kind === 'failed' ? 'error' : fetched.status, seconds);
    if (fetched.kind === 'failed') {
      logger.warn({ reqId: ctx.id, upstream: ctx.upstream.cfg.name, err: fetched.failure.detail }, 'upstream request failed');
    }
    return { kind: 'fetched', fetched, token, fetchedBy: encodeFetchedBy(fetcher(token, ctx.req.headers.authorization)) };
  };
}
