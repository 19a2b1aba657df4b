/**
 * The GraphQL request path (`POST <route>/graphql` on an upstream with `graphql: true`):
 *
 *   credential -> pool: body (capped) -> queries only (operation.ts) -> cached query (query.ts)
 *              -> client's own: body (capped) -> a query: cached query, in the credential's partition
 *                                            -> a mutation: sent as it is, then what it touches purged
 *                                            -> anything else, or a body past the cap: sent as it is
 *              -> none: passed through unchanged (GitHub answers 401)
 *
 * A pooled call goes upstream on a token of the `graphql` resource (send.ts) and the consumer sees
 * the pool's x-ratelimit-*. With `graphql_cache_seconds` 0, or a pool whose tokens are not
 * equivalent (a token's answer is its own), nothing is cached. A mutation purges the answers filed
 * under the ids of its input and of its answer (src/cache/rules/graphql-tags.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mutationTags } from '../../cache/rules/graphql-tags.js';
import { POOL, type Partitioner } from '../../cache/rules/key.js';
import type { RefreshScheduler } from '../../cache/store/refresh-scheduler.js';
import { cacheStatus, failureStatus, headerValue } from '../../http/headers/fields.js';
import { dropHopByHop } from '../../http/headers/hop-by-hop.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import { answer, writeError } from '../../http/answer.js';
import { resolveCredential, type Credential, type CredentialRules } from '../../pool/consumers/credential.js';
import { UNKNOWN_CONSUMER, type OidcPresented } from '../../pool/consumers/gate.js';
import { errors } from '../../http/errors.js';
import { NOT_SERVED, type Reply, type Served } from '../../http/reply.js';
import type { UpstreamRuntime } from '../upstreams.js';
import type { PoolContext } from '../../pool/pooled-fetch.js';
import { classifyUpstreamError } from '../../upstream/fetch.js';
import { readBody } from '../../http/body.js';
import { MAX_BODY_BYTES } from './limits.js';
import { clientCall, pooledQuery, type ClientCall } from './operation.js';
import type { GraphqlRuntime } from './runtime.js';
import type { GraphqlAnswers } from './answer-cache.js';
import { continued } from './client-body.js';
import { createCachedQuery, type QueryCall } from './query.js';
import { passedOn, type ReplyFor } from './replies.js';
import { createSend, queryBody, type Send } from './send.js';
import type { SpanHandle } from '../../platform/trace/tracing.js';

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
  readonly partitioner: Partitioner;
  readonly answers: GraphqlAnswers;
  readonly refreshAhead?: RefreshScheduler | undefined;
  readonly maxEntryBytes: number;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

export type GraphqlPath = (req: IncomingMessage, res: ServerResponse, route: GraphqlRoute, trace: GraphqlTrace) => Served | Promise<Served>;

/** A call past its credential: what every step reads. */
type Call = Omit<QueryCall, 'partition'>;

export function createGraphqlPath(deps: GraphqlDeps): GraphqlPath {
  const { pool, partitioner, answers, metrics, logger } = deps;
  const send: Send = createSend(deps);
  const cachedQuery = createCachedQuery({ answers, send, metrics, logger, refreshAhead: deps.refreshAhead });

  const refused = (call: Call, reply: ReturnType<typeof errors.graphqlRefused>, reason: string): Served => {
    metrics.graphqlRefused.inc({ upstream: call.upstream.cfg.name, reason });
    return answer(call, reply);
  };

  const pooled = async (call: Call, tokens: PoolContext): Promise<Served> => {
    const read = await readBody(call.req, MAX_BODY_BYTES);
    if (read.kind === 'failed') return NOT_SERVED; // the client went away
    if (read.kind === 'too-large') {
      call.res.shouldKeepAlive = false;
      return refused(call, errors.payloadTooLarge(MAX_BODY_BYTES), 'too_large');
    }
    const query = pooledQuery(read.body.toString('utf8'));
    if (query.kind === 'refused') return refused(call, errors.graphqlRefused(query.status, query.message), query.reason);
    // A token's answer is its own when the tokens are not equivalent: nothing is shared.
    if (call.graphql.ttlSeconds === 0 || !tokens.pool.equivalent)
      return answer(call, (await uncached(send, call, queryBody(query), 'query')).reply);
    return cachedQuery({ ...call, partition: POOL }, query);
  };

  /**
   * A mutation with a client's own credential: sent as it is, then what it touched is purged before
   * its answer goes out (the client's next read, on this replica, shows its change).
   */
  const mutation = async (call: Call, body: Buffer, sent: Extract<ClientCall, { kind: 'mutation' }>): Promise<Served> => {
    const { reply, data } = await uncached(send, call, body, 'as-sent');
    const answered = data === undefined ? undefined : parsedData(data);
    const tags = sent.mutations.flatMap((operation) => mutationTags(sent.document, operation, sent.variables, answered));
    try {
      metrics.cacheTagPurges.inc({ source: 'mutation' }, await answers.purge([...new Set(tags)]));
    } catch (err) {
      logger.warn({ reqId: call.id, err: (err as Error).message }, 'purge after a mutation failed');
    }
    return answer(call, reply);
  };

  const own = async (call: Call): Promise<Served> => {
    const read = await readBody(call.req, MAX_BODY_BYTES, true);
    if (read.kind === 'failed') return NOT_SERVED;
    if (read.kind === 'too-large') return forward(call, read.head);
    const sent = clientCall(read.body.toString('utf8'));
    if (sent.kind === 'query' && call.graphql.ttlSeconds > 0)
      return cachedQuery({ ...call, partition: partitioner.partitionOf(headerValue(call.req.headers.authorization)) }, sent);
    if (sent.kind === 'mutation') return mutation(call, read.body, sent);
    return answer(call, (await uncached(send, call, read.body, 'as-sent')).reply);
  };

  /** Streamed upstream unread (http-proxy-3): `head`, what was read of the body before the rest. */
  const forward = (call: Call, head?: Buffer[]): Served => {
    call.res.setHeader('x-request-id', call.id);
    const { graphql, path } = call;
    graphql.passThrough.forward(
      call.req,
      call.res,
      path,
      graphql.upstreamPath(path),
      call.id,
      call.span,
      head && continued(head, call.req),
    );
    return NOT_SERVED;
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
    const onBodyError = (err: unknown): void => {
      // Headers already went out (a body over cache.max_entry_bytes streams): the connection is cut.
      logger.warn({ reqId: id, upstream: upstream.cfg.name, err: classifyUpstreamError(err).detail }, 'upstream body failed');
    };
    const tokens = cred.kind === 'pool' ? pool : undefined;
    const to: ReplyFor = { cfg: upstream.cfg, pool: tokens?.headers.forResource('graphql'), onBodyError };
    const call: Call = {
      req,
      res,
      id,
      upstream,
      method: 'POST',
      route: trace.route,
      path: route.path,
      cred,
      graphql,
      span: route.span,
      headers: req.headers,
      to,
    };
    // Without a credential (and no pool to lend one) the call goes as it is: GitHub answers it.
    if (tokens === undefined && cred.kind !== 'client') return forward(call);
    dropHopByHop(req.headers);
    const path = tokens === undefined ? own(call) : pooled(call, tokens);
    return path.catch((err: unknown) => {
      logger.error({ reqId: id, err: (err as Error).message }, 'graphql call failed');
      return answer(call, errors.internal(upstream.cfg));
    });
  };
}

/** A call sent as it is (uncached): its answer passed on, with Cache-Status `fwd=bypass`, and its body when it was read. */
async function uncached(
  send: Send,
  call: Call,
  body: Buffer,
  kind: 'query' | 'as-sent',
): Promise<{ reply: Reply; data: Buffer | undefined }> {
  const got = await send(call, body, kind, call.span, false);
  if (got.kind === 'unavailable')
    return { reply: errors.poolUnavailable(got.reason, got.retryAfterSeconds, call.to.pool?.record() ?? {}), data: undefined };
  const { fetched, token } = got;
  if (fetched.kind === 'failed') {
    const served = { outcome: 'error' as const, upstreamStatus: undefined, token };
    const headers = failureStatus('bypass', fetched.failure.detail);
    return { reply: errors.upstreamFailed(call.upstream.cfg, fetched.failure, served, headers), data: undefined };
  }
  const data = fetched.kind === 'response' ? fetched.body : undefined;
  return { reply: passedOn(call.to, fetched, token, cacheStatus({ fwd: 'bypass' })), data };
}

/** A mutation answer's `data`, when it is JSON (its ids are purged). */
function parsedData(body: Buffer): unknown {
  try {
    const value = JSON.parse(body.toString('utf8')) as { data?: unknown };
    return value !== null && typeof value === 'object' ? value.data : undefined;
  } catch {
    return undefined;
  }
}
