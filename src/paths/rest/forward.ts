/**
 * Streaming forward of a GET or HEAD that the cache does not handle (policy none, Range
 * requests, and a client that refused the coding of an entry the proxy may not decode): status,
 * end-to-end headers and body bytes go to the client as the upstream sends them. A pool consumer's answer is first read up to POOLED_HEAD_BYTES, so that a token's 401 or
 * rate limit is retried on another token and the token's x-ratelimit-* are replaced by the pool's.
 * A transit failure before any byte reaches the client is retried (src/upstream/retries.ts).
 */
import { cacheStatus, failureStatus } from '../../http/headers/fields.js';
import { requestHeadersForUpstream } from '../../http/headers/hop-by-hop.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import { setTimeout as delay } from 'node:timers/promises';
import type { Dispatcher } from 'undici';
import { classifyUpstreamError, transitOfThrown, closeUpstreamSpan, openUpstreamSpan, type Fetched } from '../../upstream/fetch.js';
import { transitOfStatus, type TransitReason } from '../../upstream/retries.js';
import { answer } from '../../http/answer.js';
import type { RequestContext } from '../context.js';
import { errors } from '../../http/errors.js';
import { consumerOf, fetchPooled, type PoolContext } from '../../pool/pooled-fetch.js';
import { resourceOf } from '../../pool/rules/rate-limit.js';
import { streamReply, type Reply, type Served } from '../../http/reply.js';
import { codingMissStatus } from './cached-reply.js';

const BYPASS = cacheStatus({ fwd: 'bypass' });

/** Bodies of pooled streamed answers are read up to this size before they go out (to spot limit errors). */
const POOLED_HEAD_BYTES = 64 * 1024;

/**
 * Forwards a request. `coding`: the cached path's request of a client that refused the stored
 * coding (cached.ts): its Cache-Status says so, and `prefer` is the pool token that fetched the
 * entry (its ETag matches that credential's), as a revalidation of the entry would prefer.
 */
export type Forward = (ctx: RequestContext, coding?: CodingForward) => Promise<Served>;

export interface CodingForward {
  readonly prefer: string | undefined;
}

/** One direct exchange's end: an answer head, or what the request threw; `transit` if a retry may help. */
type Sent =
  | { up: Dispatcher.ResponseData; sentAt: number; transit: TransitReason | undefined }
  | { err: unknown; transit: TransitReason | undefined };

export function createForward(logger: Logger, metrics: Metrics, pool: PoolContext | undefined): Forward {
  const bodyFailed = (ctx: RequestContext) => (err: unknown) => {
    // Headers already went out: the only honest signal left is to cut the connection.
    logger.warn({ reqId: ctx.id, upstream: ctx.upstream.cfg.name, err: classifyUpstreamError(err).detail }, 'upstream body failed');
  };

  /** Cache-Status bypass on caching upstreams (a Range request), none on policy none; a refused coding's own. */
  const statusOf = (ctx: RequestContext, coding: CodingForward | undefined, status: number): string | undefined => {
    if (coding !== undefined) return codingMissStatus(status);
    return ctx.upstream.policy.kind !== 'none' ? BYPASS : undefined;
  };

  const failed = (ctx: RequestContext, failure: ReturnType<typeof classifyUpstreamError>, token?: string): Reply => {
    metrics.countUpstream(ctx.upstream.cfg.name, ctx.route, 'error');
    logger.warn({ reqId: ctx.id, upstream: ctx.upstream.cfg.name, err: failure.detail }, 'upstream request failed');
    const headers = ctx.upstream.policy.kind !== 'none' ? failureStatus('bypass', failure.detail) : undefined;
    return errors.upstreamFailed(ctx.upstream.cfg, failure, { outcome: 'error', upstreamStatus: undefined, token }, headers);
  };

  /**
   * The upstream's answer head, after the retries a transit failure allows (none once the client
   * left), or what was thrown; the body of an answer that is retried is discarded.
   */
  const send = async (ctx: RequestContext, headers: Record<string, string | string[]>): Promise<Sent> => {
    const { client } = ctx.upstream;
    for (let retried = 0; ; retried++) {
      const sentAt = Date.now();
      // Traced: each attempt's span ends with the answer's head (its body streams to the client).
      const span = client.tracing.on
        ? openUpstreamSpan(client, { method: ctx.method, path: ctx.path, headers, parent: ctx.span }, headers)
        : undefined;
      let got: Sent;
      try {
        const up = await client.request({ method: ctx.method, path: ctx.path, headers, retry: retried > 0 });
        if (span !== undefined) closeUpstreamSpan(span, { status: up.statusCode });
        got = { up, sentAt, transit: transitOfStatus(up.statusCode, up.headers) };
      } catch (err) {
        if (span !== undefined) closeUpstreamSpan(span, { failure: classifyUpstreamError(err) });
        got = { err, transit: transitOfThrown(err) };
      }
      const again = ctx.res.destroyed ? undefined : client.retries.decide(ctx.method, retried, got.transit);
      if (again?.kind !== 'retry') return got;
      if ('up' in got) await got.up.body.dump().catch(() => undefined);
      await delay(again.delayMs);
    }
  };

  const direct = async (
    ctx: RequestContext,
    headers: Record<string, string | string[]>,
    coding: CodingForward | undefined,
  ): Promise<Reply | undefined> => {
    // No AbortSignal per request (measurably costly): if the client leaves, the writer destroys the
    // upstream body; an upstream that has not answered yet is bounded by the configured timeouts.
    const got = await send(ctx, headers);
    if (!('up' in got)) {
      if (ctx.res.destroyed) return undefined; // the client went away; nothing to answer
      return failed(ctx, classifyUpstreamError(got.err));
    }
    const { up, sentAt } = got;
    metrics.countUpstream(ctx.upstream.cfg.name, ctx.route, up.statusCode, (Date.now() - sentAt) / 1000);
    up.body.on('error', () => undefined); // destroying an undici body (client gone) emits an abort error
    const { statusCode: status, headers: upstreamHeaders, body: rest } = up;
    return streamReply({
      status,
      upstreamHeaders,
      cacheStatus: statusOf(ctx, coding, status),
      pool: undefined,
      token: undefined,
      head: [],
      rest,
      headersOnly: false,
      onBodyError: bodyFailed(ctx),
    });
  };

  const pooled = async (
    ctx: RequestContext,
    headers: Record<string, string | string[]>,
    tokens: PoolContext,
    coding: CodingForward | undefined,
  ): Promise<Reply> => {
    const request = { method: ctx.method, path: ctx.path, headers, parent: ctx.span, abandoned: () => ctx.res.destroyed };
    const consumer = consumerOf(tokens, ctx.cred);
    const got = await fetchPooled(ctx.upstream.client, request, POOLED_HEAD_BYTES, tokens.pool, coding?.prefer, consumer);
    const headersOf = tokens.headers.forResource(resourceOf(ctx.path, ctx.upstream.client.basePath));
    if (got.kind === 'unavailable') return errors.poolUnavailable(got.reason, got.retryAfterSeconds, headersOf.record());
    const { f: fetched, token } = got;
    if (fetched.kind === 'failed') return failed(ctx, fetched.failure, token);
    metrics.countUpstream(ctx.upstream.cfg.name, ctx.route, fetched.status, seconds(fetched));
    const body = fetched.kind === 'response' ? { head: [fetched.body], rest: undefined } : { head: fetched.head, rest: fetched.rest };
    const cacheStatus = statusOf(ctx, coding, fetched.status);
    const streamed = { status: fetched.status, upstreamHeaders: fetched.headers, cacheStatus, pool: headersOf, token };
    return streamReply({ ...streamed, ...body, headersOnly: false, onBodyError: bodyFailed(ctx) });
  };

  return async (ctx, coding) => {
    const headers = requestHeadersForUpstream(ctx.req.headers, ctx.cred.kind === 'pool');
    headers['x-request-id'] = ctx.id;
    try {
      const reply =
        ctx.cred.kind === 'pool' && pool !== undefined ? await pooled(ctx, headers, pool, coding) : await direct(ctx, headers, coding);
      return reply === undefined ? { outcome: 'bypass', upstreamStatus: undefined, token: undefined } : answer(ctx, reply);
    } catch (err) {
      logger.error({ reqId: ctx.id, err: (err as Error).message }, 'forward failed');
      return answer(ctx, errors.internal(ctx.upstream.cfg));
    }
  };
}

function seconds(fetched: Exclude<Fetched, { kind: 'failed' }>): number | undefined {
  return fetched.kind === 'response' ? (fetched.responseTime - fetched.requestTime) / 1000 : undefined;
}
