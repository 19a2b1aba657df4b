/**
 * One upstream exchange for the cache: the client's end-to-end headers minus those the cache owns,
 * the stored entry's validators, a pool token when the request uses the pool (the token that
 * stored the entry first: its ETag only matches that credential; src/cache/rules/freshen.ts says what is sent
 * once that token has a new value), then counted and logged. A stored 404 or 410 is filed
 * under its tags here too (`fileNegative`).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Got, CacheResult } from '../../cache/rules/classify.js';
import { ANONYMOUS_FETCHER, type CacheEntry, type FetchedBy } from '../../cache/rules/entry.js';
import { storedValidators, validatorsByToken } from '../../cache/rules/freshen.js';
import { isNegativeStatus, pathTags } from '../../cache/rules/classify.js';
import { type Partitioner, isEquivalentAccept } from '../../cache/rules/key.js';
import { SURROGATE_CAPABILITY } from '../../cache/rules/surrogate-control.js';
import { CONDITIONAL_HEADERS, headerValue } from '../../http/headers/fields.js';
import { requestHeadersForUpstream } from '../../http/headers/hop-by-hop.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { RequestContext } from '../context.js';
import { decodeFetched } from '../../upstream/fetch.js';
import { consumerOf, fetchPooled, type PoolContext } from '../../pool/pooled-fetch.js';
import { retentionSeconds } from '../../cache/rules/policy.js';
import type { TaggedAbout, TagStore } from '../../cache/store/tags.js';
import type { Cache } from '../../cache/store/cache.js';

/** Request headers never forwarded on cached fetches: the cache sets its own validators and coding. */
const CACHE_OWNED = [...CONDITIONAL_HEADERS, 'range', 'cache-control', 'pragma', 'accept-encoding'];

/** How much larger than the entry cap a decoded body may be (JSON gzips about 10:1; more is a bomb). */
const DECODED_PER_ENCODED = 32;

/** What an exchange reads of a request: a client's, or a refresh ahead's copy of the one that read the entry (refresh-ahead.ts). */
export type ExchangeContext = Pick<RequestContext, 'id' | 'upstream' | 'path' | 'route' | 'cred' | 'span'> & {
  readonly req: { readonly headers: IncomingHttpHeaders };
  /** The client's response; a refresh ahead has none (nobody waits, and it may retry). */
  readonly res?: { readonly destroyed: boolean; readonly writableEnded: boolean };
};

/** `background`: a refresh ahead or a stale-while-revalidate revalidation nobody waits for (it spends only the points clients leave, and never waits). */
export type UpstreamExchange = (ctx: ExchangeContext, stale: CacheEntry | undefined, background?: boolean) => Promise<Got>;

export interface ExchangeDeps {
  readonly pool: PoolContext | undefined;
  readonly partitioner: Partitioner;
  readonly maxEntryBytes: number;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

export function createUpstreamExchange({ pool, partitioner, maxEntryBytes, metrics, logger }: ExchangeDeps): UpstreamExchange {
  const fetcher = (token: string | undefined, credential: string | undefined, authorization: string | undefined): FetchedBy => {
    if (token !== undefined) return credential === undefined ? { kind: 'pool', token } : { kind: 'pool', token, credential };
    return authorization === undefined ? ANONYMOUS_FETCHER : { kind: 'client', credential: partitioner.credentialId(authorization) };
  };
  const valueId = (authorization: string): string => partitioner.credentialId(authorization);

  return async (ctx, stale, background = false) => {
    const headers = requestHeadersForUpstream(ctx.req.headers, ctx.cred.kind === 'pool');
    for (const name of CACHE_OWNED) delete headers[name];
    headers['x-request-id'] = ctx.id;
    headers['accept-encoding'] = 'gzip';
    // Equivalent Accept values share an entry: the upstream sees one spelling (none: GitHub's default), whose validators it gave.
    if (ctx.upstream.sharesAccept && isEquivalentAccept(headerValue(ctx.req.headers.accept))) delete headers.accept;
    const policy = ctx.upstream.policy.kind;
    // A shared cache in front of the origin: the origin may address it with Surrogate-Control.
    if (policy === 'rfc9111') headers['surrogate-capability'] = SURROGATE_CAPABILITY;

    const tokens = ctx.cred.kind === 'pool' ? pool?.pool : undefined;
    const stored = stale === undefined ? undefined : storedValidators(stale);
    const mode = ctx.upstream.cfg.cache.rotated_token_revalidation;
    // Under `last_modified` the pool tells each token's value by its id, and says which one it used (for `fetchedBy`).
    const request = {
      method: 'GET' as const,
      path: ctx.path,
      headers,
      tokenHeaders: validatorsByToken(stored, mode, policy),
      parent: ctx.span,
      // A client that left unanswered gets no retry; a refresh ahead has no client, and retries.
      abandoned: () => ctx.res !== undefined && ctx.res.destroyed && !ctx.res.writableEnded,
      ...(mode === 'last_modified' ? { valueId } : {}),
      ...(background ? { background } : {}),
    };
    const pooled = await fetchPooled(ctx.upstream.client, request, maxEntryBytes, tokens, stored?.token, consumerOf(pool, ctx.cred));
    if (pooled.kind === 'unavailable') return pooled;
    const { f: received, token, credential } = pooled;
    const decoding = received.kind === 'response' ? await decodeFetched(received, maxEntryBytes * DECODED_PER_ENCODED) : undefined;
    const fetched = decoding?.ok === false ? decoding.failure : received;
    if (pooled.switched) metrics.tokenSwitchRevalidations.inc();
    const seconds = fetched.kind === 'response' ? (fetched.responseTime - fetched.requestTime) / 1000 : undefined;
    metrics.countUpstream(ctx.upstream.cfg.name, ctx.route, fetched.kind === 'failed' ? 'error' : fetched.status, seconds);
    if (fetched.kind === 'failed') {
      logger.warn({ reqId: ctx.id, upstream: ctx.upstream.cfg.name, err: fetched.failure.detail }, 'upstream request failed');
    }
    const fetchedBy = fetcher(token, credential, ctx.req.headers.authorization);
    return { kind: 'fetched', fetched, token, fetchedBy, decoded: decoding?.ok === true ? decoding.decoded : undefined };
  };
}

/*
 * A stored 404 or 410 (src/cache/rules/classify.ts) is filed under its path's repository and
 * owner (src/cache/store/tags.ts), so that a webhook delivery that could create the path purges it.
 * An answer that went upstream before a purge of one of those tags may predate the change: its
 * entry is dropped again, here and on the other replicas.
 */
/** Files `result`'s entry when it is a stored negative one; `where.apiPath`: its path below the API root. */
export function fileNegative(
  tags: TagStore,
  cache: Pick<Cache, 'l1' | 'shared' | 'written'>,
  logger: Logger,
  result: CacheResult,
  where: { readonly upstream: string; readonly apiPath: string; readonly partition: TaggedAbout['partition'] },
  sentAt: number | undefined,
): void {
  if (result.kind !== 'entry' || result.storeKey === undefined || !isNegativeStatus(result.entry.status)) return;
  const names = pathTags(where.apiPath);
  if (names.length === 0) return;
  const key = result.storeKey;
  const about: TaggedAbout = { upstream: where.upstream, what: where.apiPath.slice(0, 200), partition: where.partition };
  const since = sentAt ?? result.entry.storedAt;
  const filing = tags.file(key, names, retentionSeconds(result.entry) * 1000, since, about, cache.written(key));
  filing.then(
    (kept) => {
      if (kept) return;
      cache.l1?.delete(key);
      cache.shared?.drop(key);
    },
    (err: unknown) => logger.warn({ err: (err as Error).message }, 'filing a negative entry failed'),
  );
}
