/**
 * What a GraphQL query is to the cache (its `CacheRequest`: key, partition, directives, policy) and
 * the work one flight does: the call upstream, its answer stored when it may be (200, `data`, no
 * `errors`, no `no-store`, within the entry cap, filed under its tags).
 */
import type { CacheResult } from '../../cache/rules/classify.js';
import { acceptKeyPart } from '../../cache/rules/key.js';
import { clientDirectives, clientNoCacheMode } from '../../cache/rules/client-directives.js';
import { graphqlTags, storableData } from '../../cache/rules/graphql-tags.js';
import type { CacheRequest } from '../../cache/rules/request.js';
import type { CacheEntry } from '../../cache/rules/entry.js';
import { requestDirectives, headerReader, headerValue } from '../../http/headers/fields.js';
import type { OperationLabels } from '../../platform/metrics/operation-label.js';
import type { SpanHandle } from '../../platform/trace/tracing.js';
import type { Fetched } from '../../upstream/fetch.js';
import { answerResult, GraphqlCacheRequest, graphqlPolicy, type GraphqlAnswers } from './answer-cache.js';
import { graphqlCacheKey } from './cache-key.js';
import type { PooledQuery } from './operation.js';
import { CLIENT_SELECTING, queryBody, type Send, type SendContext } from './send.js';

/** Headers a stored answer keeps (the rest is the upstream's, or the pool's, at the time). */
const STORED_HEADERS = ['content-type', 'x-github-media-type'] as const;
/** Headers of a request that select its answer, in the cache key's order. */
const SELECTING = ['accept', 'graphql-features', 'x-github-api-version', ...CLIENT_SELECTING] as const;

/** A query as the cache sees it, in `partition` (POOL, or a client credential's keyed hash). */
export function requestOf(call: SendContext, partition: string, query: PooledQuery): CacheRequest {
  const { upstream, headers } = call;
  const header = headerReader(headers);
  const key = graphqlCacheKey({
    upstream: upstream.cfg.name,
    partition,
    document: query.document,
    variables: query.variables,
    operationName: query.operationName,
    // Equivalent Accept values (src/cache/rules/key.ts) select the same answer; a preview keeps its own.
    selecting: SELECTING.map((name) => (name === 'accept' ? acceptKeyPart(header(name), true) : header(name))),
  });
  // A client's `no-cache` as on REST (cache.client_no_cache); a POST is never a conditional request.
  const mode = clientNoCacheMode(upstream.policy.kind, upstream.cfg.cache.client_no_cache);
  const directives = clientDirectives(requestDirectives(headers['cache-control'], headers.pragma), mode, false);
  const policy = graphqlPolicy(call.graphql.ttlSeconds);
  return new GraphqlCacheRequest(key, partition, upstream.cfg.name, call.cred.kind, policy, directives, header);
}

/** What one upstream call gave: the flight's result, and the upstream answer (the caller that flew passes it on). */
export interface Flown {
  readonly result: CacheResult;
  readonly fetched: Fetched | undefined;
}

export interface FlightDeps {
  readonly answers: GraphqlAnswers;
  readonly send: Send;
  readonly labels: OperationLabels;
}

/** One upstream call, its answer stored when it may be: the work a flight shares. `background`: a refresh ahead. */
export async function fetchAndStore(
  { answers, send, labels }: FlightDeps,
  req: CacheRequest,
  call: SendContext,
  query: PooledQuery,
  parent: SpanHandle | undefined,
  background: boolean,
): Promise<Flown> {
  const got = await send(call, queryBody(query), 'query', parent, background);
  if (got.kind === 'unavailable') return { result: got, fetched: undefined };
  const { fetched, token, fetchedBy } = got;
  if (fetched.kind === 'failed') return { result: { kind: 'failed', failure: fetched.failure, token, corrupt: false }, fetched };
  if (fetched.kind === 'too-large') return { result: { ...fetched, token }, fetched };
  const headers: Array<[string, string]> = [];
  for (const name of STORED_HEADERS) {
    const value = headerValue(fetched.headers[name]);
    if (value !== undefined) headers.push([name, value]);
  }
  const entry = answers.entryOf(req, { ...fetched, headers, fetchedBy });
  const contentType = headerValue(fetched.headers['content-type']);
  const data = req.directives.noStore === true ? undefined : storableData(fetched.status, contentType, fetched.body);
  const tags = data === undefined ? undefined : graphqlTags(query.document, query.operation, query.variables, data.data);
  const about = { upstream: req.upstream, what: labels.of(query.operationName), partition: req.credential };
  const stored = tags !== undefined && answers.store(req, entry, tags, fetched.requestTime, about);
  return { result: answerResult(entry, stored ? req.keys.flight : undefined, token), fetched };
}

/** The tags of a stored answer to `query` (an answer read from L2), or undefined when its body does not give them. */
export function entryTags(query: PooledQuery, entry: CacheEntry): string[] | undefined {
  const data = storableData(entry.status, 'application/json', entry.body);
  return data === undefined ? undefined : graphqlTags(query.document, query.operation, query.variables, data.data);
}
