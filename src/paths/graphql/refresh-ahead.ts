/**
 * Refresh ahead for GraphQL answers (`upstreams[].cache.refresh_ahead`, as on REST: the timing is
 * src/cache/rules/refresh-ahead.ts's): a fresh hit schedules, once per answer, a call shortly before
 * the answer expires, so the next reader finds it fresh. A GraphQL answer has no validators: the
 * refresh is a whole query and costs its points, so it goes as background work (the pacing rules
 * let it spend only what clients leave) and through the same flight as a client's miss. It is
 * skipped when the answer it was scheduled for is no longer the one held (a purge came, or another
 * refresh).
 */
import { randomUUID } from 'node:crypto';
import type { CacheResult } from '../../cache/rules/classify.js';
import type { CacheEntry } from '../../cache/rules/entry.js';
import { freshUntil, refreshAt } from '../../cache/rules/refresh-ahead.js';
import type { CacheRequest } from '../../cache/rules/request.js';
import type { RefreshScheduler } from '../../cache/store/refresh-scheduler.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import { fetchAndStore, requestOf, type FlightDeps } from './flight.js';
import type { PooledQuery } from './operation.js';
import type { SendContext } from './send.js';

export interface GraphqlRefreshDeps extends FlightDeps {
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly scheduler: RefreshScheduler | undefined;
}

/** Called on a fresh hit in `partition`: schedules the answer's refresh unless one is scheduled for it. */
export type NoteRead = (
  call: SendContext & { readonly partition: string },
  read: CacheRequest,
  query: PooledQuery,
  entry: CacheEntry,
) => void;

export function createGraphqlRefresh(deps: GraphqlRefreshDeps): NoteRead | undefined {
  const { scheduler, metrics, logger, answers } = deps;
  if (scheduler === undefined) return undefined;

  const refresh = async (req: CacheRequest, copy: SendContext, query: PooledQuery, read: CacheEntry): Promise<void> => {
    const held = answers.inL1(req);
    if (held === undefined || held.storedAt !== read.storedAt) return metrics.refreshAhead.inc({ result: 'skipped' });
    const fetch = (): Promise<CacheResult> => fetchAndStore(deps, req, copy, query, undefined, true).then((flown) => flown.result);
    const flight = answers.fly(req, true, fetch, undefined, held);
    const result = await flight.promise;
    if (result.kind === 'too-large') result.rest.destroy(); // nobody streams a body fetched in the background
    const joined = flight.joined || result.kind === 'followed';
    metrics.refreshAhead.inc({ result: joined ? 'coalesced' : result.kind === 'entry' ? 'modified' : 'error' });
  };

  return (call, read, query, entry) => {
    const key = read.keys.flight;
    if (scheduler.has(key, entry.storedAt)) return;
    const at = refreshAt(entry, Date.now(), Math.random(), false);
    if (at === undefined) return;
    // A copy holding no socket: the refresh runs after this call is answered.
    const { upstream, graphql, path, route, cred } = call;
    const copy: SendContext = { id: randomUUID(), upstream, graphql, path, route, cred, headers: { ...call.headers } };
    const req = requestOf(copy, call.partition, query);
    const job = (): Promise<void> =>
      refresh(req, copy, query, entry).catch((err: unknown) => {
        metrics.refreshAhead.inc({ result: 'error' });
        logger.error({ reqId: copy.id, err: (err as Error).message }, 'GraphQL refresh ahead failed');
      });
    scheduler.schedule(key, entry.storedAt, at, job, freshUntil(entry));
  };
}
