/**
 * The reply for a request on the cached path after an upstream exchange (its own, or the one it
 * was coalesced onto); a hit's reply is the cache's (src/cache/store/cache.ts `hit`). Stale entries stand
 * in for failures while stale-if-error allows; Cache-Status (RFC 9211) says what happened. An
 * entry's form for this client (its coding, Link and Location, body URLs) is resolved here, once
 * (src/cache/store/entry-form.ts): `answer()` writes it as it is.
 */
import type { CacheResult } from '../../cache/rules/classify.js';
import { poolTokenOf, type CacheEntry } from '../../cache/rules/entry.js';
import { STALE } from '../../cache/store/cache.js';
import { currentAge, usableOnError, type Plan } from '../../cache/rules/policy.js';
import { cacheStatus, failureStatus, type CacheStatusInput } from '../../http/headers/fields.js';
import type { Logger } from '../../platform/log/logger.js';
import type { RequestContext } from '../context.js';
import { errors } from '../../http/errors.js';
import type { PoolHeaders } from '../../pool/rules/report.js';
import { resourceOf } from '../../pool/rules/rate-limit.js';
import { streamReply, type Reply, type Served } from '../../http/reply.js';
import { refusesCoding } from '../../http/representation.js';
import { fixedCoding } from '../../cache/store/entry-codec.js';

/**
 * The client explicitly refused the coding of the entry that would answer it, which the proxy may
 * not change (`Cache-Control: no-transform`) or cannot (not gzip): cached.ts forwards its request
 * instead, preferring `prefer`, the pool token that fetched the entry.
 */
export interface RefusedCoding {
  readonly kind: 'refused-coding';
  readonly prefer: string | undefined;
}

/** What the cached path answers: a reply, or a request to forward because the client refused the stored coding. */
export type CachedReply = Reply | RefusedCoding;

/** The pool's headers for pool consumers, in the request's rate-limit resource; undefined for everyone else. */
export function poolHeadersFor(ctx: RequestContext, pool: PoolHeaders | undefined): PoolHeaders | undefined {
  return ctx.cred.kind === 'pool' ? pool?.forResource(resourceOf(ctx.path, ctx.upstream.client.basePath)) : undefined;
}

/** A stored entry as the reply, in this client's form (none when it refused the stored coding: the request is forwarded). */
function entryReply(
  ctx: RequestContext,
  pool: PoolHeaders | undefined,
  entry: CacheEntry,
  status: CacheStatusInput,
  age: number,
  served: Served,
): CachedReply {
  const form = ctx.upstream.forms.formFor(ctx.req.headers, entry);
  if (form === undefined) return { kind: 'refused-coding', prefer: poolTokenOf(entry.fetchedBy) };
  const extra = poolHeadersFor(ctx, pool)?.flat(poolTokenOf(entry.fetchedBy));
  const ranges = ctx.upstream.policy.kind === 'rfc9111';
  return { kind: 'form', form, cacheStatus: cacheStatus(status), age, extra, ranges, ...served };
}

const COALESCED: Served = { outcome: 'coalesced', upstreamStatus: undefined, token: undefined };

export interface Fetch {
  readonly plan: Extract<Plan, { kind: 'fetch' }>;
  /** This request waited on another's exchange. */
  readonly joined: boolean;
  readonly now: number;
  /** The request's own Cache-Status detail (an ignored directive), shown unless what happened has one of its own. */
  readonly detail?: string;
}

/** The reply after an upstream exchange. */
export function resultReply(
  ctx: RequestContext,
  pool: PoolHeaders | undefined,
  logger: Logger,
  result: CacheResult,
  fetch: Fetch,
): CachedReply {
  const { stale, forced } = fetch.plan;
  const token = fetch.joined ? undefined : 'token' in result ? result.token : undefined;
  const staleOnError = (fwdStatus: number, upstreamStatus: number | undefined): CachedReply | undefined => {
    if (stale === undefined || !usableOnError(stale, fetch.now)) return undefined;
    const age = currentAge(stale, fetch.now);
    return entryReply(ctx, pool, stale, { fwd: 'stale', fwdStatus, ttl: stale.lifetime - age, detail: 'stale-if-error' }, age, {
      outcome: 'stale',
      upstreamStatus,
      token,
    });
  };
  switch (result.kind) {
    case 'too-large':
      return streamReply({
        status: result.status,
        upstreamHeaders: result.headers,
        cacheStatus: cacheStatus({ fwd: 'miss', fwdStatus: result.status, detail: 'too-large' }),
        pool: poolHeadersFor(ctx, pool),
        token,
        head: result.head,
        rest: result.rest,
        headersOnly: ctx.method === 'HEAD',
        onBodyError: (err) => logger.warn({ reqId: ctx.id, err: (err as Error).message }, 'upstream body failed'),
      });
    case 'unavailable': {
      const detail = `pool-${result.reason}`;
      if (stale !== undefined && usableOnError(stale, fetch.now)) {
        const age = currentAge(stale, fetch.now);
        return entryReply(ctx, pool, stale, { hit: true, ttl: stale.lifetime - age, detail }, age, STALE);
      }
      return errors.poolUnavailable(result.reason, result.retryAfterSeconds, {
        ...poolHeadersFor(ctx, pool)?.record(),
        'cache-status': cacheStatus({ fwd: 'miss', detail }),
      });
    }
    case 'failed':
      return (
        staleOnError(result.failure.status, undefined) ??
        errors.upstreamFailed(
          ctx.upstream.cfg,
          result.failure,
          { outcome: 'error', upstreamStatus: undefined, token },
          failureStatus(forced ? 'request' : stale !== undefined ? 'stale' : 'miss', result.failure.detail),
        )
      );
    case 'followed': {
      const age = currentAge(result.entry, fetch.now);
      const status = { hit: true, ttl: result.entry.lifetime - age, detail: 'l2-collapsed' };
      return entryReply(ctx, pool, result.entry, status, age, COALESCED);
    }
    case 'entry': {
      const upstreamStatus = result.fwdStatus;
      if (result.transient) {
        const fallback = staleOnError(upstreamStatus, upstreamStatus);
        if (fallback !== undefined) return fallback;
      }
      const stored = result.storeKey !== undefined;
      const age = currentAge(result.entry, fetch.now);
      const status: CacheStatusInput = {
        fwd: forced ? 'request' : stale !== undefined ? 'stale' : 'miss',
        fwdStatus: upstreamStatus,
        stored,
        collapsed: fetch.joined,
        ttl: stored ? result.entry.lifetime - age : undefined,
        detail: fetch.detail,
      };
      const outcome = fetch.joined ? 'coalesced' : upstreamStatus === 304 ? 'revalidated' : result.transient ? 'error' : 'miss';
      return entryReply(ctx, pool, result.entry, status, age, { outcome, upstreamStatus, token });
    }
  }
}

/**
 * The reply is a streamed answer over the entry cap in a coding the client explicitly refused and
 * the proxy may not change (`Cache-Control: no-transform`) or cannot (not gzip). Such a reply never
 * goes to that client (cached.ts forwards its request instead), no more than such an entry does.
 */
export function refusedStream(ctx: RequestContext, reply: Reply): boolean {
  if (reply.kind !== 'stream') return false;
  const coding = fixedCoding(reply.headers['content-encoding'], reply.headers['cache-control']);
  return coding !== undefined && refusesCoding(ctx.req.headers['accept-encoding'], coding);
}

/** The Cache-Status of a request forwarded because the client refused the stored coding (RFC 9211 `vary-miss`). */
export const codingMissStatus = (fwdStatus: number): string => cacheStatus({ fwd: 'vary-miss', fwdStatus, detail: 'coding' });

/** only-if-cached, when what is stored is in a coding the client refused: nothing usable is stored (RFC 9111 section 5.2.1.7). */
export const onlyIfCachedCoding = (): Reply => errors.onlyIfCached(cacheStatus({ fwd: 'vary-miss', detail: 'only-if-cached' }));
