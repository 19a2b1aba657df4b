/**
 * The cached request path for GET and HEAD, as one pipeline of returned values:
 *
 *   cache.hit (key, L1, plan, this client's form: fresh? answer now: the hit path stays synchronous)
 *   cache.lookup (L2) -> plan -> coalesce (in-process and across replicas) -> exchange upstream
 *   -> classify -> apply to the cache -> reply -> answer
 *
 * The rules are pure and live in src/cache (policy.ts, classify.ts, key.ts) and in
 * cached-reply.ts; the storage is src/cache/store/cache.ts; `answer()` is the only writer.
 */
import { classify, unselected304, type CacheResult, type Got } from '../../cache/rules/classify.js';
import type { Coalescer } from '../../cache/store/coalesce.js';
import type { CacheEntry } from '../../cache/rules/entry.js';
import type { Partitioner } from '../../cache/rules/key.js';
import type { Plan } from '../../cache/rules/policy.js';
import { RoutedRequest, type CacheRequest, type PoolMembers } from '../../cache/rules/request.js';
import type { Cache, Found, Ready } from '../../cache/store/cache.js';
import type { TagStore } from '../../cache/store/tags.js';
import { apiPathname } from '../../http/route.js';
import { fileNegative, type ExchangeContext, type UpstreamExchange } from './exchange.js';
import type { Logger } from '../../platform/log/logger.js';
import { answer } from '../../http/answer.js';
import { onlyIfCachedCoding, poolHeadersFor, refusedStream, resultReply, type CachedReply } from './cached-reply.js';
import type { RequestContext } from '../context.js';
import { errors } from '../../http/errors.js';
import { createRefreshAhead, type NoteRead } from './refresh-ahead.js';
import type { RefreshScheduler } from '../../cache/store/refresh-scheduler.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { PoolContext } from '../../pool/pooled-fetch.js';
import type { TokenPool } from '../../pool/rules/types.js';
import { cacheStatus, failureStatus } from '../../http/headers/fields.js';
import { NOT_SERVED, type Served } from '../../http/reply.js';
import type { Forward } from './forward.js';
import { isConsumerRefusal } from '../../pool/rules/fair-share.js';
import { ATTR, NO_TRACING, SPANS, type SpanHandle, type Tracing } from '../../platform/trace/tracing.js';

export interface CachedPathDeps {
  readonly cache: Cache;
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
  /** Where stored 404s are filed for webhook purges (exchange.ts); without it they only expire. */
  readonly tags?: TagStore | undefined;
}

/** Whether a flight's result answers every request coalesced onto it (else a joiner fetches for itself). */
function sharable(result: CacheResult): boolean {
  if (result.kind === 'too-large') return false;
  return result.kind !== 'unavailable' || !isConsumerRefusal(result.reason);
}

/** When an exchange's request went upstream: a stale mark made since then covers its answer (src/cache/store/memory-store.ts). */
const sentAt = (got: Got): number | undefined =>
  got.kind === 'fetched' && got.fetched.kind === 'response' ? got.fetched.requestTime : undefined;

/**
 * The pool's members as the keys see them: live (the pool's members change), membership by a hash
 * lookup, and a generation that moves when the pool gives a new list (it replaces its list, never
 * changes it in place).
 */
function poolMembers(pool: TokenPool): PoolMembers {
  let seen = pool.names;
  let generation = 0;
  return {
    get names() {
      return pool.names;
    },
    has: (name) => pool.authorizationOf(name) !== undefined,
    get generation() {
      const names = pool.names;
      if (names !== seen) {
        seen = names;
        generation++;
      }
      return generation;
    },
  };
}

/** Serves a GET/HEAD on a caching upstream; synchronous when L1 holds a fresh entry. */
export class CachedPath {
  readonly #cache: Cache;
  readonly #coalescer: Coalescer;
  readonly #exchange: UpstreamExchange;
  readonly #partitioner: Partitioner;
  readonly #pool: PoolContext | undefined;
  /** Non-equivalent pool tokens each have a partition: a request on the pool may use any member's (the members now). */
  readonly #members: PoolMembers | undefined;
  readonly #logger: Logger;
  readonly #forward: Forward;
  readonly #tracing: Tracing;
  readonly #noteRead: NoteRead | undefined;
  readonly #tags: TagStore | undefined;

  constructor(deps: CachedPathDeps) {
    this.#cache = deps.cache;
    this.#coalescer = deps.coalescer;
    this.#exchange = deps.exchange;
    this.#partitioner = deps.partitioner;
    this.#pool = deps.pool;
    this.#members = deps.pool === undefined ? undefined : poolMembers(deps.pool.pool);
    this.#logger = deps.logger;
    this.#forward = deps.forward;
    this.#tracing = deps.tracing ?? NO_TRACING;
    this.#tags = deps.tags;
    const { refreshAhead: scheduler, metrics } = deps;
    this.#noteRead =
      scheduler === undefined || metrics === undefined
        ? undefined
        : createRefreshAhead({
            scheduler,
            cache: deps.cache,
            coalescer: deps.coalescer,
            metrics,
            logger: deps.logger,
            pool: deps.pool?.pool,
            fetchAndStore: (ctx, req, stale, background) => this.#fetchAndStore(ctx, req, stale, background),
          });
  }

  /** A hit is answered in this turn; anything else once L2 or the upstream has answered. */
  serve(ctx: RequestContext): Served | Promise<Served> {
    const req = this.#requestFor(ctx);
    const hit = this.#cache.hit(req, ctx.upstream.forms, ctx.req.headers);
    if (hit.kind === 'form') return this.#ready(ctx, req, hit);
    if (hit.kind === 'refused-coding') return this.#serve(ctx, req, hit);
    if (hit.plan !== undefined) return this.#proceed(ctx, req, hit.plan, true);
    return this.#lookup(req, ctx.span).then((found) => {
      const after = this.#cache.answer(req, found.entry, ctx.upstream.forms, ctx.req.headers);
      if (after.kind === 'form') return this.#ready(ctx, req, after);
      if (after.kind === 'refused-coding') return this.#serve(ctx, req, after);
      return this.#proceed(ctx, req, after.plan!, found.answered);
    });
  }

  /** The request as the cache sees it: its keys (with the pool's members when tokens are not equivalent) and directives. */
  #requestFor(ctx: RequestContext): CacheRequest {
    const { upstream, cred } = ctx;
    const pool = this.#pool;
    return new RoutedRequest(
      {
        upstream: upstream.cfg.name,
        pathname: ctx.pathname,
        search: ctx.search,
        method: ctx.method,
        credential: cred.kind,
        policy: upstream.policy,
        noCache: upstream.cfg.cache.client_no_cache,
        // Read per request: tokens whose scopes differ make the pool non-equivalent.
        members: pool === undefined || pool.pool.equivalent ? undefined : this.#members,
        sharesAccept: upstream.sharesAccept,
      },
      ctx.req.headers,
      this.#partitioner,
    );
  }

  /** An entry the cache made ready: the pool's headers added, a refresh or revalidation scheduled, written. */
  #ready(ctx: RequestContext, req: CacheRequest, ready: Ready): Served {
    ready.ranges = ctx.upstream.policy.kind === 'rfc9111';
    if (ctx.cred.kind === 'pool') {
      const { fetchedBy } = ready.entry;
      ready.extra = poolHeadersFor(ctx, this.#pool?.headers)?.flat(fetchedBy.kind === 'pool' ? fetchedBy.token : undefined);
    }
    if (ready.fresh) {
      if (ctx.upstream.cfg.cache.refresh_ahead) this.#noteRead?.(ctx, req, ready.entry);
    } else if (ready.background) this.#revalidateInBackground(ctx, req, ready.entry);
    return answer(ctx, ready);
  }

  /** The L2 lookup; with tracing on, a span saying what it found. */
  #lookup(req: CacheRequest, parent: SpanHandle | undefined): Promise<Found> {
    if (!this.#tracing.on) return this.#cache.lookup(req);
    return this.#tracing.child(SPANS.l2Lookup, parent, { [ATTR.upstream]: req.upstream }, async (span) => {
      const found = await this.#cache.lookup(req);
      span.set(ATTR.l2, found.entry !== undefined ? 'hit' : found.answered ? 'miss' : 'timeout');
      return found;
    });
  }

  /**
   * Writes a reply (an entry already in this client's form: cached-reply.ts), unless it is in a
   * coding the client explicitly refused and the proxy may not change (no-transform) or cannot (not
   * gzip): then the client's own request, with its own Accept-Encoding, goes upstream on the same
   * credential rules, and the answer is streamed uncached; the entry stays for the clients that
   * take it. Under only-if-cached: 504.
   */
  #serve(ctx: RequestContext, req: CacheRequest, reply: CachedReply): Served | Promise<Served> {
    if (reply.kind !== 'refused-coding' && !refusedStream(ctx, reply)) return answer(ctx, reply);
    if (reply.kind === 'stream') reply.rest?.destroy(); // the upstream's gzip body over the entry cap: nobody takes it
    if (req.directives.onlyIfCached === true) return answer(ctx, onlyIfCachedCoding());
    if (ctx.res.destroyed) return NOT_SERVED; // the client has gone: nothing to fetch for
    return this.#forward(ctx, { prefer: reply.kind === 'refused-coding' ? reply.prefer : undefined });
  }

  /** One upstream exchange, classified and applied to the cache: the work a flight shares. */
  async #fetchAndStore(ctx: ExchangeContext, req: CacheRequest, stale: CacheEntry | undefined, background = false): Promise<CacheResult> {
    let got = await this.#exchange(ctx, stale, background);
    // A 304 that does not select the stored response updates nothing: ask again, unconditionally.
    if (unselected304(got, stale, req)) got = await this.#exchange(ctx, undefined, background);
    const result = classify(got, stale, req, this.#cache.headerTable.pair);
    if (result.kind === 'failed' && result.corrupt) {
      this.#logger.warn({ reqId: ctx.id, upstream: req.upstream, status: result.failure.status }, 'upstream body is not valid JSON');
    }
    this.#cache.apply(result, sentAt(got), req);
    if (this.#tags !== undefined) {
      const where = { upstream: req.upstream, apiPath: apiPathname(ctx.upstream.cfg, req.pathname), partition: req.credential };
      fileNegative(this.#tags, this.#cache, this.#logger, result, where, sentAt(got));
    }
    return result;
  }

  #revalidateInBackground(ctx: RequestContext, req: CacheRequest, stale: CacheEntry): void {
    const tracing = this.#tracing;
    const run = (on: RequestContext): Promise<CacheResult> => this.#fetchAndStore(on, req, stale, true);
    // Traced, a span of the request that found the entry stale, its upstream call below it.
    const fetch = !tracing.on ? () => run(ctx) : () => tracing.child(SPANS.revalidation, ctx.span, {}, (span) => run({ ...ctx, span }));
    const { promise, joined } = this.#coalescer.run(req, stale, true, fetch, ctx.span);
    promise.then(
      (result) => {
        // Nobody streams a too-large answer started in the background: its body is dropped.
        if (result.kind === 'too-large' && !joined) result.rest.destroy();
      },
      (err: unknown) => this.#logger.error({ reqId: ctx.id, err: (err as Error).message }, 'background revalidation failed'),
    );
  }

  /** Answers a plan that needs the upstream (or only-if-cached's 504). */
  #proceed(ctx: RequestContext, req: CacheRequest, plan: Plan, redisAnswered: boolean): Served | Promise<Served> {
    if (plan.kind !== 'fetch') return answer(ctx, errors.onlyIfCached(cacheStatus({ fwd: 'miss', detail: 'only-if-cached' })));
    return this.#fetchThrough(ctx, req, plan, redisAnswered).catch((err: unknown) => {
      this.#logger.error({ reqId: ctx.id, err: (err as Error).message }, 'cache fetch failed');
      return answer(ctx, errors.internal(ctx.upstream.cfg, failureStatus('miss', 'internal error')));
    });
  }

  async #fetchThrough(ctx: RequestContext, req: CacheRequest, plan: Extract<Plan, { kind: 'fetch' }>, redisAnswered: boolean) {
    const fetch = () => this.#fetchAndStore(ctx, req, plan.stale);
    const { promise, joined } = this.#coalescer.run(req, plan.stale, redisAnswered, fetch, ctx.span);
    const tracing = this.#tracing;
    const result =
      joined && tracing.on ? await tracing.child(SPANS.flightWait, ctx.span, { [ATTR.flight]: 'process' }, () => promise) : await promise;
    const poolHeaders = this.#pool?.headers;
    if (joined && !sharable(result)) {
      // The flight's body was over the entry cap: it went to the request that started the flight
      // and nothing was stored. A joiner fetches for itself, through this same path rather than a
      // plain streamed forward: its answer is read up to the cap before anything goes out, so a
      // fault on this second exchange is a 502/504 (or the stale entry), never a body cut after
      // its headers; only a body that is again over the cap is streamed. Likewise a joiner never
      // takes another consumer's refusal (its share spent) as its own answer.
      if (ctx.res.destroyed) return NOT_SERVED; // the client has gone
      const own = await this.#fetchAndStore(ctx, req, plan.stale);
      const reply = resultReply(ctx, poolHeaders, this.#logger, own, { plan, joined: false, now: Date.now(), detail: req.detail });
      return this.#serve(ctx, req, reply);
    }
    const reply = resultReply(ctx, poolHeaders, this.#logger, result, { plan, joined, now: Date.now(), detail: req.detail });
    return this.#serve(ctx, req, reply);
  }
}
