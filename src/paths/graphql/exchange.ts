/**
 * The GraphQL request path (`POST <route>/graphql` on an upstream with `graphql: true`):
 *
 *   credential -> client's own: passed through unchanged (http-proxy-3)
 *              -> pool: body (capped) -> queries only (operation.ts) -> cache -> pool token -> answer
 *
 * A pooled call goes upstream on a token chosen in the `graphql` resource, as JSON rebuilt from
 * what was checked (so the upstream runs exactly the query the proxy let through). Its answer
 * settles the token like a REST answer, except that a 200 whose errors say RATE_LIMITED counts as
 * a rate limit (src/pool/rules/graphql-rate-limit.ts): the token is paused or spent and the call is tried on another
 * one. The consumer sees the pool's x-ratelimit-* of the `graphql` resource. With
 * `graphql_cache_seconds`, answers without errors are kept that long under a key of the
 * normalised query, its variables, operation name and the pool's partition (cache-key.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { POOL } from '../../cache/rules/key.js';
import { cacheStatus } from '../../http/headers/cache-status.js';
import { dropHopByHop, graphqlHeadersForUpstream } from '../../http/headers/hop-by-hop.js';
import { headerValue } from '../../http/headers/value.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import { answer, writeError } from '../../http/answer.js';
import type { AnswerContext } from '../context.js';
import { resolveCredential, type Credential, type CredentialRules } from '../../pool/consumers/credential.js';
import { UNKNOWN_CONSUMER, type OidcPresented } from '../../pool/consumers/gate.js';
import { errors } from '../../http/errors.js';
import { NOT_SERVED, streamReply, type Reply, type Served } from '../../http/reply.js';
import type { UpstreamRuntime } from '../upstreams.js';
import { consumerOf, fetchPooled, type PoolContext } from '../../pool/pooled-fetch.js';
import { TOKEN_HEADER, type PoolHeaders } from '../../pool/rules/pool-headers.js';
import { classifyUpstreamError } from '../../upstream/client.js';
import { readBody } from '../../http/body.js';
import { graphqlCacheKey } from './cache-key.js';
import { MAX_BODY_BYTES } from './limits.js';
import { pooledQuery, type PooledQuery } from './operation.js';
import { cacheableAnswer, tokenStatus } from '../../pool/rules/graphql-rate-limit.js';
import type { GraphqlAnswer, GraphqlCache, GraphqlRuntime } from './runtime.js';
import { ATTR, SPANS, type SpanHandle } from '../../platform/trace/tracing.js';

/** A routed GraphQL request: what the handler knows when it hands it over. */
export interface GraphqlRoute {
  readonly id: string;
  readonly upstream: UpstreamRuntime;
  readonly graphql: GraphqlRuntime;
  /** Upstream path and query, as routing built it (`<base>/graphql...`). */
  readonly path: string;
  readonly rules: CredentialRules;
  /** The request's server span, when tracing is on. */
  readonly span: SpanHandle | undefined;
  /** A verified OIDC consumer (the handler's consumer gate). */
  readonly oidc?: OidcPresented | undefined;
}

/** What the recorder reads of it (src/main/recorder.ts `Trace`). */
export interface GraphqlTrace {
  ctx: { readonly upstream: UpstreamRuntime; readonly cred: Credential; readonly pathname: string } | undefined;
  readonly route: string;
}

export interface GraphqlDeps {
  readonly pool: PoolContext | undefined;
  readonly maxEntryBytes: number;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

export type GraphqlPath = (req: IncomingMessage, res: ServerResponse, route: GraphqlRoute, trace: GraphqlTrace) => Served | Promise<Served>;

interface Call extends AnswerContext {
  readonly route: string;
  readonly path: string;
  readonly cred: Credential & { kind: 'pool' };
  readonly graphql: GraphqlRuntime;
  readonly span: SpanHandle | undefined;
}

/** Headers of a stored answer served again (the pool's x-ratelimit-* and Cache-Status are added then). */
const STORED_HEADERS = ['content-type', 'x-github-media-type'] as const;

/** Headers of a request that select its answer, in the cache key's order. */
const SELECTING = ['accept', 'graphql-features', 'x-github-api-version'] as const;

export function createGraphqlPath({ pool, maxEntryBytes, metrics, logger }: GraphqlDeps): GraphqlPath {
  const refused = (call: Call, reply: ReturnType<typeof errors.graphqlRefused>, reason: string): Served => {
    metrics.graphqlRefused.inc({ upstream: call.upstream.cfg.name, reason });
    return answer(call, reply);
  };

  const fromCache = (call: Call, tokens: PoolContext, cache: GraphqlCache, key: string): Served | undefined => {
    const hit = cache.get(key);
    if (hit === undefined) return undefined;
    const age = Math.max(0, Math.floor((Date.now() - hit.storedAt) / 1000));
    const headers: Record<string, string> = { ...hit.headers, ...tokens.headers.forResource('graphql').record(), age: String(age) };
    if (hit.token !== undefined) headers[TOKEN_HEADER] = hit.token;
    headers['cache-status'] = cacheStatus({ hit: true, ttl: cache.ttlSeconds - age });
    return answer(call, {
      kind: 'body',
      status: 200,
      headers,
      body: hit.body,
      outcome: 'hit',
      upstreamStatus: undefined,
      token: hit.token,
    });
  };

  /** The upstream's answer to the call, as a reply (and stored when the cache may keep it). */
  const exchange = async (
    call: Call,
    tokens: PoolContext,
    query: PooledQuery,
    key: string | undefined,
    parent = call.span,
  ): Promise<Reply> => {
    const headers = graphqlHeadersForUpstream(call.req.headers);
    headers['content-type'] = 'application/json; charset=utf-8';
    headers['x-request-id'] = call.id;
    const body = Buffer.from(JSON.stringify({ query: query.query, variables: query.variables, operationName: query.operationName }));
    const request = { method: 'POST' as const, path: call.graphql.upstreamPath(call.path), headers, body, tokenStatus, parent };
    const got = await fetchPooled(call.upstream.client, request, maxEntryBytes, tokens.pool, undefined, consumerOf(tokens, call.cred));
    const poolHeaders: PoolHeaders = tokens.headers.forResource('graphql');
    if (got.kind === 'unavailable') return errors.poolUnavailable(got.reason, got.retryAfterSeconds, poolHeaders.record());
    const { f: fetched, token } = got;
    if (fetched.kind === 'failed') {
      metrics.countUpstream(call.upstream.cfg.name, call.route, 'error');
      logger.warn({ reqId: call.id, upstream: call.upstream.cfg.name, err: fetched.failure.detail }, 'upstream request failed');
      return errors.upstreamFailed(call.upstream.cfg, fetched.failure, { outcome: 'error', upstreamStatus: undefined, token });
    }
    const seconds = fetched.kind === 'response' ? (fetched.responseTime - fetched.requestTime) / 1000 : undefined;
    metrics.countUpstream(call.upstream.cfg.name, call.route, fetched.status, seconds);
    const stored = key !== undefined && fetched.kind === 'response' && store(call.graphql.cache!, key, fetched, token);
    const status = key === undefined ? cacheStatus({ fwd: 'bypass' }) : cacheStatus({ fwd: 'miss', fwdStatus: fetched.status, stored });
    const parts = fetched.kind === 'response' ? { head: [fetched.body], rest: undefined } : { head: fetched.head, rest: fetched.rest };
    const reply = streamReply({
      status: fetched.status,
      upstreamHeaders: fetched.headers,
      cacheStatus: status,
      pool: poolHeaders,
      token,
      ...parts,
      headersOnly: false,
      onBodyError: (err: unknown) => {
        // Headers already went out (a body over cache.max_entry_bytes streams): the connection is cut.
        logger.warn({ reqId: call.id, upstream: call.upstream.cfg.name, err: classifyUpstreamError(err).detail }, 'upstream body failed');
      },
    });
    return key === undefined ? reply : { ...reply, outcome: 'miss' };
  };

  const pooled = async (call: Call, tokens: PoolContext): Promise<Served> => {
    dropHopByHop(call.req.headers);
    const read = await readBody(call.req, MAX_BODY_BYTES);
    if (read.kind === 'failed') return NOT_SERVED; // the client went away
    if (read.kind === 'too-large') {
      call.res.shouldKeepAlive = false;
      return refused(call, errors.payloadTooLarge(MAX_BODY_BYTES), 'too_large');
    }
    const query = pooledQuery(read.body.toString('utf8'));
    if (query.kind === 'refused') return refused(call, errors.graphqlRefused(query.status, query.message), query.reason);
    const cache = tokens.pool.equivalent ? call.graphql.cache : undefined; // a token-specific answer is never shared
    const key = cache === undefined ? undefined : keyOf(call, query);
    const hit = cache === undefined || key === undefined ? undefined : fromCache(call, tokens, cache, key);
    if (hit !== undefined) return hit;
    const { tracing } = call.upstream.client;
    if (!tracing.on) return answer(call, await exchange(call, tokens, query, key));
    const attributes = {
      'graphql.operation.type': 'query',
      'graphql.operation.name': query.operationName?.slice(0, 128) ?? undefined,
      [ATTR.upstream]: call.upstream.cfg.name,
    };
    return answer(call, await tracing.child(SPANS.graphql, call.span, attributes, (span) => exchange(call, tokens, query, key, span)));
  };

  return (req, res, route, trace) => {
    const { upstream, id, graphql } = route;
    const cred = resolveCredential(req.headers, route.rules, 'delete', req.socket, route.oidc);
    if (cred === undefined) {
      metrics.consumerRejections.labels(UNKNOWN_CONSUMER, 'key').inc();
      req.resume();
      writeError(res, errors.consumerKeyRequired(), id);
      return NOT_SERVED;
    }
    trace.ctx = { upstream, cred, pathname: route.path.split('?', 1)[0]! };
    if (cred.kind !== 'pool' || pool === undefined) {
      // A client's own credential (or none): its call goes as it is, mutations included.
      res.setHeader('x-request-id', id);
      graphql.passThrough.forward(req, res, route.path, graphql.upstreamPath(route.path), id, route.span);
      return NOT_SERVED;
    }
    const call: Call = { req, res, id, upstream, method: 'POST', route: trace.route, path: route.path, cred, graphql, span: route.span };
    return pooled(call, pool).catch((err: unknown) => {
      logger.error({ reqId: id, err: (err as Error).message }, 'graphql call failed');
      return answer(call, errors.internal(upstream.cfg));
    });
  };
}

function keyOf(call: Call, query: PooledQuery): string {
  return graphqlCacheKey({
    upstream: call.upstream.cfg.name,
    partition: POOL,
    document: query.document,
    variables: query.variables,
    operationName: query.operationName,
    selecting: SELECTING.map((name) => headerValue(call.req.headers[name])),
  });
}

type StoredFrom = { status: number; headers: Record<string, string | string[] | undefined>; body: Buffer };

/** Keeps an answer without errors; returns whether it did. */
function store(cache: GraphqlCache, key: string, fetched: StoredFrom, token: string | undefined): boolean {
  const contentType = headerValue(fetched.headers['content-type']);
  if (!cacheableAnswer(fetched.status, contentType, fetched.body)) return false;
  const headers: Record<string, string> = {};
  for (const name of STORED_HEADERS) {
    const value = headerValue(fetched.headers[name]);
    if (value !== undefined) headers[name] = value;
  }
  const entry: GraphqlAnswer = { headers, body: fetched.body, token, storedAt: Date.now() };
  cache.set(key, entry);
  return true;
}
