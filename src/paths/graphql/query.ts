/**
 * A GraphQL query through the cache, as one pipeline of returned values:
 *
 *   key -> L1 (fresh: answer now, in the same turn) -> L2 -> flight (one upstream call per key, here
 *   and across replicas) -> store (200, `data`, no `errors`, within the entry cap, filed under its
 *   tags) -> reply -> answer
 *
 * The key (cache-key.ts) holds the credential partition: the pool's (equivalent tokens) or the
 * keyed hash of a client's own credential, so an answer is only ever served to who could have
 * asked for it, viewer fields included. A fresh hit may schedule a refresh ahead of expiry
 * (`cache.refresh_ahead`), which goes through the same flight in the background (pacing applies).
 */
import type { CacheEntry } from '../../cache/rules/entry.js';
import { decide } from '../../cache/rules/policy.js';
import type { CacheRequest } from '../../cache/rules/request.js';
import type { RefreshScheduler } from '../../cache/store/refresh-scheduler.js';
import { answer } from '../../http/answer.js';
import { errors } from '../../http/errors.js';
import { NOT_SERVED, type Served } from '../../http/reply.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import { createOperationLabels } from '../../platform/metrics/operation-label.js';
import { ATTR, SPANS, type SpanHandle } from '../../platform/trace/tracing.js';
import { isConsumerRefusal } from '../../pool/rules/fair-share.js';
import type { Fetched } from '../../upstream/fetch.js';
import type { AnswerContext } from '../context.js';
import type { GraphqlAnswers } from './answer-cache.js';
import { entryTags, fetchAndStore, requestOf, type FlightDeps, type Flown } from './flight.js';
import type { PooledQuery } from './operation.js';
import { createGraphqlRefresh } from './refresh-ahead.js';
import { flightReply, hitReply, type ReplyFor } from './replies.js';
import type { Send, SendContext } from './send.js';

/** A query call: what the path knows of it besides the query. */
export interface QueryCall extends AnswerContext, SendContext {
  readonly span: SpanHandle | undefined;
  /** The credential partition (src/cache/rules/key.ts): POOL, or a client credential's keyed hash. */
  readonly partition: string;
  readonly to: ReplyFor;
}

export interface QueryDeps {
  readonly answers: GraphqlAnswers;
  readonly send: Send;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** The refresh-ahead schedule REST uses (one per process). */
  readonly refreshAhead: RefreshScheduler | undefined;
}

type Result = 'hit' | 'miss' | 'coalesced';

export type CachedQuery = (call: QueryCall, query: PooledQuery) => Served | Promise<Served>;

export function createCachedQuery({ answers, send, metrics, logger, refreshAhead }: QueryDeps): CachedQuery {
  const labels = createOperationLabels();
  const count = (call: QueryCall, query: PooledQuery, result: Result): void =>
    metrics.cacheRequests.inc({ upstream: call.upstream.cfg.name, route: call.route, operation: labels.of(query.operationName), result });

  const flying: FlightDeps = { answers, send, labels };

  /** `fetchAndStore` as a span of the request's trace, when tracing is on. */
  const traced = (req: CacheRequest, call: QueryCall, query: PooledQuery): Promise<Flown> => {
    const { tracing } = call.upstream.client;
    if (!tracing.on) return fetchAndStore(flying, req, call, query, call.span, false);
    const attributes = {
      'graphql.operation.type': 'query',
      'graphql.operation.name': query.operationName?.slice(0, 128) ?? undefined,
      [ATTR.upstream]: call.upstream.cfg.name,
    };
    return tracing.child(SPANS.graphql, call.span, attributes, (span) => fetchAndStore(flying, req, call, query, span, false));
  };

  const noteRead = createGraphqlRefresh({ ...flying, metrics, logger, scheduler: refreshAhead });

  const hit = (call: QueryCall, req: CacheRequest, query: PooledQuery, entry: CacheEntry): Served => {
    count(call, query, 'hit');
    if (call.upstream.cfg.cache.refresh_ahead) noteRead?.(call, req, query, entry);
    return answer(call, hitReply(call.to, entry, Date.now(), req.keys.flight));
  };

  /** Not fresh here: one flight for every identical call, then each its reply. */
  const miss = async (call: QueryCall, req: CacheRequest, query: PooledQuery, redisAnswered: boolean): Promise<Served> => {
    let own: Fetched | undefined;
    const flight = answers.fly(
      req,
      redisAnswered,
      () =>
        traced(req, call, query).then((flown) => {
          own = flown.fetched;
          return flown.result;
        }),
      call.span,
    );
    let result = await flight.promise;
    let joined = flight.joined;
    // A joiner never takes an answer too large to share, nor another consumer's refusal: it calls for itself.
    if (joined && (result.kind === 'too-large' || (result.kind === 'unavailable' && isConsumerRefusal(result.reason)))) {
      if (call.res.destroyed) return NOT_SERVED; // the client has gone
      const flown = await traced(req, call, query);
      [result, own, joined] = [flown.result, flown.fetched, false];
    }
    if (result.kind === 'followed') answers.adopt(req, result.entry, entryTags(query, result.entry));
    count(call, query, joined || result.kind === 'followed' ? 'coalesced' : 'miss');
    return answer(call, flightReply(call.to, result, joined ? undefined : own, Date.now(), req.keys.flight));
  };

  const fresh = (req: CacheRequest, entry: CacheEntry | undefined): entry is CacheEntry =>
    entry !== undefined && decide(entry, req.directives, Date.now()).kind === 'fresh';

  return (call, query) => {
    const req = requestOf(call, call.partition, query);
    const inL1 = answers.inL1(req);
    if (fresh(req, inL1)) return hit(call, req, query, inL1);
    const failed = (err: unknown): Served => {
      logger.error({ reqId: call.id, err: (err as Error).message }, 'graphql call failed');
      return answer(call, errors.internal(call.upstream.cfg));
    };
    if (inL1 !== undefined || !answers.shared) return miss(call, req, query, true).catch(failed);
    return answers
      .lookup(req)
      .then((found) => {
        const held = found.entry === undefined ? undefined : answers.adopt(req, found.entry, entryTags(query, found.entry));
        return fresh(req, held) ? hit(call, req, query, held) : miss(call, req, query, found.answered);
      })
      .catch(failed);
  };
}
