/**
 * Fetches a response for the cache: the body is buffered up to a cap so it can be stored.
 * A body that outgrows the cap is handed back as what was read so far plus the rest of the
 * stream, for the caller to pass through uncached. A body cut short never becomes a response.
 * A GET or HEAD that fails in transit is sent again as the upstream's retry state decides
 * (retries.ts); the token pool runs its own attempts (`fetchAttempt`) to count each on a lease.
 */
import type { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import type { Dispatcher } from 'undici';
import { readCapped } from '../platform/capped-read.js';
import { ownedConcat } from '../platform/owned-bytes.js';
import type { UpstreamFailure } from '../http/errors.js';
import { ATTR, pathOnly, upstreamSpanName, type SpanHandle } from '../platform/trace/tracing.js';
import { classifyUpstreamError, transitOfThrown, type UpstreamClient } from './client.js';
import type { RetryDecision } from './retries.js';
import { transitOfStatus, type TransitReason } from './retry-rules.js';

export type UpstreamHeaders = Dispatcher.ResponseData['headers'];

export type Fetched =
  | {
      kind: 'response';
      status: number;
      headers: UpstreamHeaders;
      body: Buffer;
      /** ms since epoch when the request was sent and when the response head arrived. */
      requestTime: number;
      responseTime: number;
    }
  | { kind: 'too-large'; status: number; headers: UpstreamHeaders; head: Buffer[]; rest: Readable }
  /** `transit`: it failed before any response byte, and may be retried for that reason. */
  | { kind: 'failed'; failure: UpstreamFailure; transit?: TransitReason };

export interface UpstreamRequest {
  method: 'GET' | 'HEAD' | 'POST';
  path: string;
  headers: Record<string, string | string[]>;
  body?: Buffer;
  /** The pool token's name the request goes on (for its span; never the value). */
  token?: string | undefined;
  /** The span the request's span descends from, when tracing is on. */
  parent?: SpanHandle | undefined;
  /** Whether the client left before it was answered: then a failure is not retried. */
  abandoned?: () => boolean;
}

/**
 * With tracing on, the client span of one upstream request: started as a child of `req.parent`,
 * its id written into `headers` as the `traceparent` (replacing any the client sent).
 */
export function openUpstreamSpan(client: UpstreamClient, req: UpstreamRequest, headers: Record<string, string | string[]>): SpanHandle {
  const origin = new URL(client.origin);
  const span = client.tracing.start(
    upstreamSpanName(req.method),
    req.parent,
    {
      [ATTR.method]: req.method,
      [ATTR.serverAddress]: origin.hostname,
      [ATTR.serverPort]: origin.port === '' ? undefined : Number(origin.port),
      [ATTR.urlPath]: pathOnly(req.path),
      [ATTR.upstream]: client.name,
      [ATTR.token]: req.token,
    },
    true,
  );
  client.tracing.inject(headers, span);
  return span;
}

/** Ends an upstream span with the answer's status (and whether it was a 304), or the failure. */
export function closeUpstreamSpan(span: SpanHandle, outcome: { status: number } | { failure: UpstreamFailure }): void {
  if ('failure' in outcome) {
    span.set(ATTR.errorType, outcome.failure.detail);
    span.fail(`upstream ${outcome.failure.status}`);
  } else {
    span.set(ATTR.status, outcome.status);
    span.set(ATTR.notModified, outcome.status === 304);
    if (outcome.status >= 500) span.fail(`status ${outcome.status}`);
  }
  span.end();
}

/** What follows an attempt: a retry after a transit failure while the client waits and the retry state allows, or nothing. */
export function nextAttempt(client: UpstreamClient, req: UpstreamRequest, retried: number, fetched: Fetched): RetryDecision {
  return req.abandoned?.() === true ? { kind: 'stop' } : client.retries.decide(req.method, retried, transitOf(fetched));
}

/** The transit failure an attempt ended with (a retry may help), or undefined. */
export function transitOf(fetched: Fetched): TransitReason | undefined {
  if (fetched.kind === 'failed') return fetched.transit;
  return fetched.kind === 'response' ? transitOfStatus(fetched.status, fetched.headers) : undefined;
}

/** `fetchAttempt`, sent again after a transit failure while the client's retry state allows. */
export async function fetchBuffered(client: UpstreamClient, req: UpstreamRequest, maxBytes: number): Promise<Fetched> {
  for (let retried = 0; ; retried++) {
    const fetched = await fetchAttempt(client, req, maxBytes, retried > 0);
    const next = nextAttempt(client, req, retried, fetched);
    if (next.kind === 'stop') return fetched;
    await delay(next.delayMs);
  }
}

/**
 * One upstream request; `retry`: on the retry pool (a connection other than the failed one). With
 * tracing on, each attempt is an upstream span (`openUpstreamSpan`).
 */
export function fetchAttempt(client: UpstreamClient, req: UpstreamRequest, maxBytes: number, retry = false): Promise<Fetched> {
  if (!client.tracing.on) return fetchOnce(client, req, maxBytes, retry);
  const headers = { ...req.headers };
  const span = openUpstreamSpan(client, req, headers);
  if (retry) span.set('etagere.retry', true);
  return fetchOnce(client, { ...req, headers }, maxBytes, retry).then((fetched) => {
    closeUpstreamSpan(span, fetched.kind === 'failed' ? fetched : { status: fetched.status });
    return fetched;
  });
}

async function fetchOnce(
  client: UpstreamClient,
  { token: _token, parent: _parent, abandoned: _abandoned, ...req }: UpstreamRequest,
  maxBytes: number,
  retry: boolean,
): Promise<Fetched> {
  const requestTime = Date.now();
  let res: Dispatcher.ResponseData;
  try {
    res = await client.request(retry ? { ...req, retry } : req);
  } catch (err) {
    const transit = transitOfThrown(err);
    const failure = classifyUpstreamError(err);
    return transit === undefined ? { kind: 'failed', failure } : { kind: 'failed', failure, transit };
  }
  const responseTime = Date.now();
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return tooLarge(res, []);
  const read = await readCapped(res.body, maxBytes);
  if (read.kind === 'failed') return { kind: 'failed', failure: classifyUpstreamError(read.error) };
  if (read.kind === 'over') return tooLarge(res, read.chunks);
  const { chunks, size } = read;
  if (req.method !== 'HEAD' && Number.isFinite(declared) && declared !== size) {
    return { kind: 'failed', failure: { status: 502, detail: 'truncated body' } };
  }
  // Always a copy of its own: a chunk can be a view into a larger socket buffer, and a small
  // Buffer.concat a slice of a shared slab, which a stored entry would otherwise keep alive (and
  // the cache's byte bound would not see).
  const body = ownedConcat(chunks, size);
  return { kind: 'response', status: res.statusCode, headers: res.headers, body, requestTime, responseTime };
}

/**
 * Hands back an unread rest of body. It keeps an error listener from here on, so an upstream
 * failure (or the caller destroying it) before the caller pipes it can never be an unhandled
 * 'error' event.
 */
function tooLarge(res: Dispatcher.ResponseData, head: Buffer[]): Fetched {
  res.body.on('error', () => undefined);
  return { kind: 'too-large', status: res.statusCode, headers: res.headers, head, rest: res.body };
}
