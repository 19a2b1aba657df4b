/**
 * Refresh ahead (`upstreams[].cache.refresh_ahead`, docs/caching.md#refresh-ahead): a fresh hit
 * schedules, once per entry version, a conditional revalidation shortly before the entry expires
 * (src/cache/rules/refresh-ahead.ts says when), so the next reader finds it fresh. The refresh is
 * a copy of the reading request (its headers, so the same credential: the client's own, or the
 * pool token that stored the entry) and goes through the same flight as a client fetch of the key:
 * a concurrent miss coalesces with it, and across replicas the flight lock lets one replica go
 * upstream while the others take its newer entry. It is skipped when the entry it was scheduled
 * for is no longer the one held (another refresh, a fetch, a purge or an eviction came first), when
 * the entry may not be used any more (its credential was rejected, its path invalidated), or when
 * the pool token that stored it has left the pool. Webhook marks and purges win as for any fetch:
 * a mark made after the refresh went upstream covers its answer (src/cache/store/memory-store.ts).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { CacheResult } from '../../cache/rules/classify.js';
import { poolTokenOf, type CacheEntry } from '../../cache/rules/entry.js';
import { freshUntil, refreshAt } from '../../cache/rules/refresh-ahead.js';
import type { CacheRequest } from '../../cache/rules/request.js';
import type { Coalescer } from '../../cache/store/coalesce.js';
import type { RefreshScheduler } from '../../cache/store/refresh-scheduler.js';
import type { Cache } from '../../cache/store/cache.js';
import { requestDirectives, headerReader } from '../../http/headers/fields.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { TokenPool } from '../../pool/rules/types.js';
import type { RequestContext } from '../context.js';
import type { ExchangeContext } from './exchange.js';

/** The values of `etagere_refresh_ahead_total{result}` (docs/operations.md). */
export type RefreshResult = 'not_modified' | 'modified' | 'error' | 'skipped' | 'coalesced';

/** One exchange, classified and stored: the cached path's `fetchAndStore`, in the background. */
export type FetchAndStore = (
  ctx: ExchangeContext,
  req: CacheRequest,
  stale: CacheEntry | undefined,
  background: boolean,
) => Promise<CacheResult>;

export interface RefreshAheadDeps {
  readonly scheduler: RefreshScheduler;
  readonly cache: Cache;
  readonly coalescer: Coalescer;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly pool: TokenPool | undefined;
  readonly fetchAndStore: FetchAndStore;
}

/** Called on a fresh hit: schedules the entry's refresh unless one is scheduled for it already. */
export type NoteRead = (ctx: RequestContext, req: CacheRequest, entry: CacheEntry) => void;

const NO_DIRECTIVES = requestDirectives(undefined, undefined);

/** What a result means for the metric; `joined`: the refresh waited on another flight of the key. */
function resultOf(result: CacheResult, joined: boolean): RefreshResult {
  if (joined || result.kind === 'followed') return 'coalesced';
  if (result.kind === 'entry') return result.transient ? 'error' : result.fwdStatus === 304 ? 'not_modified' : 'modified';
  if (result.kind === 'too-large') {
    result.rest.destroy(); // nobody streams a body fetched in the background
    return 'modified';
  }
  return 'error';
}

/** A copy of the reading request, holding no socket: what the refresh sends and how the cache sees it. */
function copyOf(ctx: RequestContext, req: CacheRequest): { ctx: ExchangeContext; req: CacheRequest } {
  const headers: IncomingHttpHeaders = { ...ctx.req.headers };
  const upstream = ctx.upstream;
  return {
    ctx: { id: randomUUID(), upstream, path: ctx.path, route: ctx.route, cred: ctx.cred, req: { headers } },
    req: {
      keys: req.keys,
      upstream: req.upstream,
      pathname: req.pathname,
      method: 'GET',
      directives: NO_DIRECTIVES,
      header: headerReader(headers),
      credential: req.credential,
      policy: upstream.policy.at(req.pathname),
    },
  };
}

export function createRefreshAhead({ scheduler, cache, coalescer, metrics, logger, pool, fetchAndStore }: RefreshAheadDeps): NoteRead {
  const count = (result: RefreshResult): void => metrics.refreshAhead.inc({ result });

  const refresh = async (ctx: ExchangeContext, req: CacheRequest, read: CacheEntry): Promise<void> => {
    const held = cache.held(req);
    const entry = cache.usable(req, held);
    if (entry === undefined || entry.storedAt !== read.storedAt)
      return count(held !== undefined && held.storedAt > read.storedAt ? 'coalesced' : 'skipped');
    const token = poolTokenOf(entry.fetchedBy);
    if (token !== undefined && pool?.authorizationOf(token) === undefined) return count('skipped');
    const { promise, joined } = coalescer.run(req, entry, true, () => fetchAndStore(ctx, req, entry, true), ctx.span, true);
    count(resultOf(await promise, joined));
  };

  const run = (ctx: ExchangeContext, req: CacheRequest, read: CacheEntry) => (): Promise<void> =>
    refresh(ctx, req, read).catch((err: unknown) => {
      count('error');
      logger.error({ reqId: ctx.id, err: (err as Error).message }, 'refresh ahead failed');
    });

  return (ctx, req, entry) => {
    if (scheduler.has(req.keys.flight, entry.storedAt)) return;
    const at = refreshAt(entry, Date.now(), Math.random());
    if (at === undefined) return;
    const copy = copyOf(ctx, req);
    scheduler.schedule(req.keys.flight, entry.storedAt, at, run(copy.ctx, copy.req, entry), freshUntil(entry));
  };
}
