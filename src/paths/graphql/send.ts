/**
 * One GraphQL call upstream, read up to `cache.max_entry_bytes` (a larger answer is passed on as
 * it comes, never stored), counted and logged:
 *
 *   pooled   on a token of the pool's `graphql` resource: a 200 RATE_LIMITED counts as a rate limit
 *            (src/pool/rules/graphql-rate-limit.ts) and the call is tried on another token; the
 *            body is JSON rebuilt from what was checked, so the upstream runs exactly that
 *   client   on the client's own credential: a query with the headers that select its answer
 *            (the cache key's) and the credential; anything else (a mutation, a body the proxy
 *            does not read) with the client's end-to-end headers and its body as sent
 *
 * A POST is never sent twice on a transit failure (src/upstream/fetch.ts).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Got } from '../../cache/rules/classify.js';
import { ANONYMOUS_FETCHER, type FetchedBy } from '../../cache/rules/entry.js';
import type { Partitioner } from '../../cache/rules/key.js';
import { graphqlHeadersForUpstream, requestHeadersForUpstream } from '../../http/headers/hop-by-hop.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { SpanHandle } from '../../platform/trace/tracing.js';
import { consumerOf, fetchPooled, type PoolContext } from '../../pool/pooled-fetch.js';
import { tokenStatus } from '../../pool/rules/graphql-rate-limit.js';
import type { Credential } from '../../pool/consumers/credential.js';
import type { UpstreamRuntime } from '../upstreams.js';
import type { GraphqlRuntime } from './runtime.js';
import type { PooledQuery } from './operation.js';

/** What a send reads of a call: a client's, or a refresh ahead's copy of the one that read the answer. */
export interface SendContext {
  readonly id: string;
  readonly upstream: UpstreamRuntime;
  readonly graphql: GraphqlRuntime;
  /** The client's path (`<route>/graphql` and its query). */
  readonly path: string;
  readonly route: string;
  readonly cred: Credential;
  readonly headers: IncomingHttpHeaders;
}

/** How a query goes upstream: a body, on the pool or on the client's credential (`background`: a refresh ahead). */
export type Send = (
  ctx: SendContext,
  body: Buffer,
  kind: 'query' | 'as-sent',
  parent: SpanHandle | undefined,
  background: boolean,
) => Promise<Got>;

/** Headers of a client's query besides GraphQL's own that select its answer: the new global id format. */
export const CLIENT_SELECTING = ['x-github-next-global-id'] as const;

/** A query's body as the upstream gets it: `query`, `variables` and `operationName`, and nothing else. */
export function queryBody(query: PooledQuery): Buffer {
  return Buffer.from(JSON.stringify({ query: query.query, variables: query.variables, operationName: query.operationName }));
}

export interface SendDeps {
  readonly pool: PoolContext | undefined;
  readonly partitioner: Partitioner;
  readonly maxEntryBytes: number;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

export function createSend({ pool, partitioner, maxEntryBytes, metrics, logger }: SendDeps): Send {
  const fetcher = (cred: Credential, token: string | undefined, authorization: string | undefined): FetchedBy => {
    if (token !== undefined) return { kind: 'pool', token };
    if (cred.kind === 'client' && authorization !== undefined)
      return { kind: 'client', credential: partitioner.credentialId(authorization) };
    return ANONYMOUS_FETCHER;
  };

  return async (ctx, body, kind, parent, background) => {
    const pooled = ctx.cred.kind === 'pool' ? pool : undefined;
    let headers: Record<string, string | string[]>;
    if (pooled !== undefined) headers = graphqlHeadersForUpstream(ctx.headers);
    else if (kind === 'query') {
      headers = graphqlHeadersForUpstream(ctx.headers);
      for (const name of [...CLIENT_SELECTING, 'authorization']) {
        const value = ctx.headers[name];
        if (value !== undefined) headers[name] = value;
      }
    } else {
      headers = requestHeadersForUpstream(ctx.headers);
      delete headers['accept-encoding']; // the answer is read (a mutation's ids): identity
    }
    if (kind === 'query' || headers['content-type'] === undefined) headers['content-type'] = 'application/json; charset=utf-8';
    headers['x-request-id'] = ctx.id;
    const request = {
      method: 'POST' as const,
      path: ctx.graphql.upstreamPath(ctx.path),
      headers,
      body,
      tokenStatus,
      parent,
      ...(background ? { background } : {}),
    };
    const got = await fetchPooled(ctx.upstream.client, request, maxEntryBytes, pooled?.pool, undefined, consumerOf(pooled, ctx.cred));
    if (got.kind === 'unavailable') return got;
    const { f: fetched, token } = got;
    const name = ctx.upstream.cfg.name;
    if (fetched.kind === 'failed') {
      metrics.countUpstream(name, ctx.route, 'error');
      logger.warn({ reqId: ctx.id, upstream: name, err: fetched.failure.detail }, 'upstream request failed');
    } else {
      const seconds = fetched.kind === 'response' ? (fetched.responseTime - fetched.requestTime) / 1000 : undefined;
      metrics.countUpstream(name, ctx.route, fetched.status, seconds);
    }
    const authorization = ctx.headers.authorization;
    return {
      kind: 'fetched',
      fetched,
      token,
      fetchedBy: fetcher(ctx.cred, token, typeof authorization === 'string' ? authorization : undefined),
    };
  };
}
