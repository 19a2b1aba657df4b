/**
 * The cached request path for GET and HEAD, as one pipeline of returned values:
 *
 *   fromL1 -> plan (fresh? answer now: the hit path stays synchronous)
 *   lookup L2 -> plan -> coalesce (in-process and across replicas) -> exchange upstream
 *   -> classify -> apply to the tiers -> reply -> answer
 *
 * The rules are pure and live in src/cache (plan.ts, classify.ts, policy.ts, key.ts) and in
 * cached-reply.ts; the storage is src/cache/store/tiers.ts; `answer()` is the only writer.
 */
import { requestDirectives, type Directives } from '../../http/headers/cache-control.js';
import { clientDirectives, clientNoCacheMode, NO_CACHE_IGNORED, type ClientNoCache } from '../../cache/rules/client-directives.js';
import { classify, unselected304, type CacheResult, type Got } from '../../cache/rules/classify.js';
import type { Coalescer } from '../../cache/store/coalesce.js';
import type { CacheEntry } from '../../cache/rules/entry.js';
import { ANONYMOUS, POOL, type Partitioner } from '../../cache/rules/key.js';
import { acceptKeyPart } from '../../cache/rules/accept.js';
import type { TagStore } from '../../cache/store/tags.js';
import { apiPathname } from '../../http/route.js';
import { fileNegative } from './negative-filing.js';
import { planFor, type Plan } from '../../cache/rules/plan.js';
import type { FreshnessPolicy } from '../../cache/rules/policy.js';
import { keysFor, type CacheRequest, type Keys, type PoolMembers } from '../../cache/rules/request.js';
import type { Tiers } from '../../cache/store/tiers.js';
import { headerReader, headerValue } from '../../http/headers/value.js';
import type { Logger } from '../../platform/log/logger.js';
import { answer } from '../../http/answer.js';
import { HitStatuses, onlyIfCachedCoding, planReply, refusedStream, resultReply, type CachedReply } from './cached-reply.js';
import type { RequestContext } from '../context.js';
import { errors } from '../../http/errors.js';
import type { ExchangeContext, UpstreamExchange } from './exchange.js';
import { createRefreshAhead } from './refresh-ahead.js';
import type { RefreshScheduler } from '../../cache/store/refresh-scheduler.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { PoolContext } from '../../pool/pooled-fetch.js';
import type { TokenPool } from '../../pool/rules/types.js';
import { NOT_SERVED, type Served } from '../../http/reply.js';
import type { Forward } from './forward.js';
import { isConsumerRefusal } from '../../pool/rules/fair-share.js';
import { ATTR, NO_TRACING, SPANS, type SpanHandle, type Tracing } from '../../platform/trace/tracing.js';

export interface CachedPathDeps {
  readonly tiers: Tiers;
  readonly coalescer: Coalescer;
  readonly exchange: UpstreamExchange;
  readonly partitioner: Partitioner;
  readonly pool: PoolContext | undefined;
  readonly logger: Logger;
  /** The streaming forward: for a client that refused the coding of an entry the proxy may not decode. */
  readonly forward: Forward;
  /** The refresh-ahead schedule (refresh-ahead.ts), used on upstreams with `cache.refresh_ahead`; without it, none. */
  readonly refreshAhead?: RefreshScheduler | undefined;
  readonly metrics?: Metrics | undefined;
  /** L2 lookups, waits on a flight and background revalidations are spans of the request's trace. */
  readonly tracing?: Tracing | undefined;
  /** Where stored 404s are filed for webhook purges (negative-filing.ts); without it they only expire. */
  readonly tags?: TagStore | undefined;
}

/** Serves a GET/HEAD on a caching upstream; synchronous when L1 holds a fresh entry. */
export type CachedPath = (ctx: RequestContext) => Served | Promise<Served>;

/** Whether a flight's result answers every request coalesced onto it (else a joiner fetches for itself). */
function sharable(result: CacheResult): boolean {
  if (result.kind === 'too-large') return false;
  return result.kind !== 'unavailable' || !isConsumerRefusal(result.reason);
}

/** When an exchange's request went upstream: a stale mark made since then covers its answer (src/cache/store/marking.ts). */
const sentAt = (got: Got): number | undefined =>
  got.kind === 'fetched' && got.fetched.kind === 'response' ? got.fetched.requestTime : undefined;

/**
 * A routed request as the cache sees it. Its policy is worked out only when an exchange needs it
 * (classify): a hit never looks at whether webhooks cover its path. (A getter on the prototype: one
 * on an object literal made every request's object slow, about 9 µs a hit.)
 */
class RoutedRequest implements CacheRequest {
  readonly upstream: string;
  readonly pathname: string;
  readonly method: 'GET' | 'HEAD';
  readonly credential: CacheRequest['credential'];
  private resolved: FreshnessPolicy | undefined = undefined;
  constructor(
    readonly keys: Keys,
    private readonly ctx: RequestContext,
    readonly directives: Readonly<Directives>,
    readonly header: (name: string) => string | undefined,
    readonly detail: string | undefined,
  ) {
    this.upstream = ctx.upstream.cfg.name;
    this.pathname = ctx.pathname;
    this.method = ctx.method;
    this.credential = ctx.cred.kind;
  }
  get policy(): FreshnessPolicy {
    return (this.resolved ??= this.ctx.upstream.policy.at(this.pathname));
  }
}

/** The pool's members as the keys see them: live (the pool's members change), membership by a hash lookup. */
const poolMembers = (pool: TokenPool): PoolMembers => ({
  get names() {
    return pool.names;
  },
  has: (name) => pool.authorizationOf(name) !== undefined,
});

/** Whether this upstream acts on a client's no-cache (src/cache/rules/client-directives.ts). */
const clientNoCache = (ctx: RequestContext): ClientNoCache =>
  clientNoCacheMode(ctx.upstream.policy.kind, ctx.upstream.cfg.cache.client_no_cache);

/** The L2 lookup; with tracing on, a span saying what it found. */
function lookup(tiers: Tiers, tracing: Tracing, req: CacheRequest, parent: SpanHandle | undefined): ReturnType<Tiers['lookup']> {
  if (!tracing.on) return tiers.lookup(req);
  return tracing.child(SPANS.l2Lookup, parent, { [ATTR.upstream]: req.upstream }, async (span) => {
    const found = await tiers.lookup(req);
    span.set(ATTR.l2, found.entry !== undefined ? 'hit' : found.answered ? 'miss' : 'timeout');
    return found;
  });
}

/** A background revalidation; traced, a span of the request that found the entry stale, its upstream call below it. */
function revalidation<T>(tracing: Tracing, ctx: RequestContext, run: (ctx: RequestContext) => Promise<T>): () => Promise<T> {
  if (!tracing.on) return () => run(ctx);
  return () => tracing.child(SPANS.revalidation, ctx.span, {}, (span) => run({ ...ctx, span }));
}

/** Builds each request's `CacheRequest`: its keys (with the pool's members when tokens are not equivalent) and directives. */
function requestBuilder(partitioner: Partitioner, pool: PoolContext | undefined): (ctx: RequestContext) => CacheRequest {
  /**
   * Non-equivalent pool tokens each have a partition: a request on the pool may use any member's
   * (the members now). Read per request: tokens whose scopes differ make the pool non-equivalent.
   */
  const members = pool === undefined ? undefined : poolMembers(pool.pool);
  const perTokenPool = (): PoolMembers | undefined => (pool === undefined || pool.pool.equivalent ? undefined : members);

  return (ctx) => {
    const headers = ctx.req.headers;
    const header = headerReader(headers);
    const { cred } = ctx;
    const partition = cred.kind === 'pool' ? POOL : cred.kind === 'anonymous' ? ANONYMOUS : partitioner.partitionOf(headers.authorization);
    const keyInput = {
      upstream: ctx.upstream.cfg.name,
      pathname: ctx.pathname,
      search: ctx.search,
      accept: acceptKeyPart(headerValue(headers.accept), ctx.upstream.sharesAccept),
      apiVersion: headerValue(headers['x-github-api-version']),
      partition,
      selecting: partitioner.selectingDigest(header),
    };
    const asked = requestDirectives(headers['cache-control'], headers.pragma);
    const conditional = headers['if-none-match'] !== undefined || headers['if-modified-since'] !== undefined;
    const directives = clientDirectives(asked, clientNoCache(ctx), conditional);
    return new RoutedRequest(
      keysFor(keyInput, cred.kind === 'pool' ? perTokenPool() : undefined),
      ctx,
      directives,
      header,
      directives === asked ? undefined : NO_CACHE_IGNORED,
    );
  };
}

export function createCachedPath(deps: CachedPathDeps): CachedPath {
  const { tiers, coalescer, exchange, partitioner, pool, logger, forward } = deps;
  const tracing = deps.tracing ?? NO_TRACING;
  const poolHeaders = pool?.headers;
  const hits = new HitStatuses();
  const requestFor = requestBuilder(partitioner, pool);

  /**
   * Writes a reply (an entry already in this client's form: cached-reply.ts), unless it is in a
   * coding the client explicitly refused and the proxy may not change (no-transform) or cannot (not
   * gzip): then the client's own request, with its own Accept-Encoding, goes upstream on the same
   * credential rules, and the answer is streamed uncached; the entry stays for the clients that
   * take it. Under only-if-cached: 504.
   */
  const serve = (ctx: RequestContext, req: CacheRequest, reply: CachedReply): Served | Promise<Served> => {
    if (reply.kind !== 'refused-coding' && !refusedStream(ctx, reply)) return answer(ctx, reply);
    if (reply.kind === 'stream') reply.rest?.destroy(); // the upstream's gzip body over the entry cap: nobody takes it
    if (req.directives.onlyIfCached === true) return answer(ctx, onlyIfCachedCoding());
    if (ctx.res.destroyed) return NOT_SERVED; // the client has gone: nothing to fetch for
    return forward(ctx, { prefer: reply.kind === 'refused-coding' ? reply.prefer : undefined });
  };

  /** One upstream exchange, classified and applied to the tiers: the work a flight shares. */
  const fetchAndStore = async (
    ctx: ExchangeContext,
    req: CacheRequest,
    stale: CacheEntry | undefined,
    background = false,
  ): Promise<CacheResult> => {
    let got = await exchange(ctx, stale, background);
    // A 304 that does not select the stored response updates nothing: ask again, unconditionally.
    if (unselected304(got, stale, req)) got = await exchange(ctx, undefined, background);
    const result = classify(got, stale, req, tiers.headerTable.pair);
    if (result.kind === 'failed' && result.corrupt) {
      logger.warn({ reqId: ctx.id, upstream: req.upstream, status: result.failure.status }, 'upstream body is not valid JSON');
    }
    tiers.apply(result, sentAt(got), req);
    if (deps.tags !== undefined) {
      const where = { upstream: req.upstream, apiPath: apiPathname(ctx.upstream.cfg, req.pathname), partition: req.credential };
      fileNegative(deps.tags, tiers, logger, result, where, sentAt(got));
    }
    return result;
  };

  const { refreshAhead: scheduler, metrics } = deps;
  const noteRead =
    scheduler === undefined || metrics === undefined
      ? undefined
      : createRefreshAhead({ scheduler, tiers, coalescer, metrics, logger, pool: pool?.pool, fetchAndStore });

  const revalidateInBackground = (ctx: RequestContext, req: CacheRequest, stale: CacheEntry): void => {
    const fetch = revalidation(tracing, ctx, (on) => fetchAndStore(on, req, stale, true));
    const { promise, joined } = coalescer.run(req, stale, true, fetch, ctx.span);
    promise.then(
      (result) => {
        // Nobody streams a too-large answer started in the background: its body is dropped.
        if (result.kind === 'too-large' && !joined) result.rest.destroy();
      },
      (err: unknown) => logger.error({ reqId: ctx.id, err: (err as Error).message }, 'background revalidation failed'),
    );
  };

  const fetchThrough = async (ctx: RequestContext, req: CacheRequest, plan: Extract<Plan, { kind: 'fetch' }>, redisAnswered: boolean) => {
    const { promise, joined } = coalescer.run(req, plan.stale, redisAnswered, () => fetchAndStore(ctx, req, plan.stale), ctx.span);
    const result =
      joined && tracing.on ? await tracing.child(SPANS.flightWait, ctx.span, { [ATTR.flight]: 'process' }, () => promise) : await promise;
    if (joined && !sharable(result)) {
      // The flight's body was over the entry cap: it went to the request that started the flight
      // and nothing was stored. A joiner fetches for itself, through this same path rather than a
      // plain streamed forward: its answer is read up to the cap before anything goes out, so a
      // fault on this second exchange is a 502/504 (or the stale entry), never a body cut after
      // its headers; only a body that is again over the cap is streamed. Likewise a joiner never
      // takes another consumer's refusal (its share spent) as its own answer.
      if (ctx.res.destroyed) return NOT_SERVED; // the client has gone
      const own = await fetchAndStore(ctx, req, plan.stale);
      return serve(ctx, req, resultReply(ctx, poolHeaders, logger, own, { plan, joined: false, now: Date.now(), detail: req.detail }));
    }
    return serve(ctx, req, resultReply(ctx, poolHeaders, logger, result, { plan, joined, now: Date.now(), detail: req.detail }));
  };

  /** Plans from what the tiers hold; answers at once unless the upstream must be asked. */
  const proceed = (
    ctx: RequestContext,
    req: CacheRequest,
    found: CacheEntry | undefined,
    redisAnswered: boolean,
  ): Served | Promise<Served> => {
    const plan = planFor(tiers.usable(req, found), req.directives, Date.now());
    if (plan.kind === 'fresh' && ctx.upstream.cfg.cache.refresh_ahead) noteRead?.(ctx, req, plan.entry);
    if (plan.kind === 'stale' && plan.background) revalidateInBackground(ctx, req, plan.entry);
    if (plan.kind !== 'fetch') return serve(ctx, req, planReply(ctx, poolHeaders, hits, plan, req.detail));
    return fetchThrough(ctx, req, plan, redisAnswered).catch((err: unknown) => {
      logger.error({ reqId: ctx.id, err: (err as Error).message }, 'cache fetch failed');
      return answer(ctx, errors.internal(ctx.upstream.cfg));
    });
  };

  return (ctx) => {
    const req = requestFor(ctx);
    const inL1 = tiers.fromL1(req);
    if (inL1 !== undefined || tiers.shared === undefined) return proceed(ctx, req, inL1, true);
    return lookup(tiers, tracing, req, ctx.span).then((found) => proceed(ctx, req, found.entry, found.answered));
  };
}
