/**
 * Fetches a response for the cache: the body is buffered up to a cap so it can be stored.
 * A body that outgrows the cap is handed back as what was read so far plus the rest of the
 * stream, for the caller to pass through uncached. A body cut short never becomes a response.
 * A GET or HEAD that fails in transit is sent again as the upstream's retry state decides
 * (retries.ts); the token pool runs its own attempts (`fetchAttempt`) to count each on a lease.
 * The upstream's client (undici pools) and the decoding of a fetched gzip body are here too.
 */
import { Pool, errors as undiciErrors, type Dispatcher } from 'undici';
import type { UpstreamFailure } from '../http/errors.js';
import { basePrefixOf } from '../http/route.js';
import type { UpstreamConfig } from '../platform/config/schema.js';
import { NO_TRACING, type Tracing, ATTR, pathOnly, upstreamSpanName, type SpanHandle } from '../platform/trace/tracing.js';
import { Retries, type RetryObserver, transitOfError, type TransitReason, type RetryDecision, transitOfStatus } from './retries.js';
import type { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { readCapped, ownedConcat } from '../platform/bytes.js';
import { createGunzip } from 'node:zlib';
import { isJsonMediaType, headerValue } from '../http/headers/fields.js';
import { contentCodingOf } from '../http/representation.js';
import { JsonSyntax } from './json-syntax.js';

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

/*
 * One undici Pool per upstream (keep-alive, bounded connections, timeouts), a small second one
 * that retries go out on (so a retry never reuses the connection that just failed), the upstream's
 * retry state (retries.ts), and the mapping of client-library errors to the proxy's 502/504.
 */
export interface UpstreamClient {
  readonly name: string;
  readonly origin: string;
  /** Path component of the upstream URL ("/" or e.g. "/api/v3"). */
  readonly basePath: string;
  /** The base path as a prefix for upstream paths: "" for "/", else without a trailing slash ("/api/v3"). */
  readonly basePrefix: string;
  /** The process's tracing: each request is a client span, its `traceparent` the proxy's (fetch.ts). */
  readonly tracing: Tracing;
  request(opts: {
    /** POST only for GraphQL calls (src/paths/graphql/exchange.ts). */
    method: 'GET' | 'HEAD' | 'POST';
    path: string;
    headers: Record<string, string | string[]>;
    body?: Buffer;
    signal?: AbortSignal;
    /** A retry: it goes out on the retry pool, never on the connection the failed attempt used. */
    retry?: boolean;
  }): Promise<Dispatcher.ResponseData>;
  /** Retries in transit of this upstream: the budget and the decision after each attempt. */
  readonly retries: Retries;
  close(): Promise<void>;
}

/** Retries are at most a tenth of the traffic (the budget): their pool is a fraction of the main one. */
const RETRY_POOL_SHARE = 8;

export function createUpstreamClient(cfg: UpstreamConfig, tracing: Tracing = NO_TRACING, onRetry?: RetryObserver): UpstreamClient {
  const url = new URL(cfg.url);
  const options = {
    pipelining: 1,
    connectTimeout: cfg.timeouts.connect_ms,
    headersTimeout: cfg.timeouts.headers_ms,
    bodyTimeout: cfg.timeouts.body_ms,
    keepAliveTimeout: 30_000,
  };
  const pool = new Pool(url.origin, { ...options, connections: cfg.connections });
  let retryPool: Pool | undefined;
  const retries = new Retries(cfg.retries, onRetry);
  return {
    name: cfg.name,
    origin: url.origin,
    basePath: url.pathname || '/',
    basePrefix: basePrefixOf(url.pathname || '/'),
    tracing,
    request: (opts) => {
      retries.sent();
      const on = opts.retry === true ? (retryPool ??= new Pool(url.origin, { ...options, connections: retryConnections(cfg) })) : pool;
      return on.request({ method: opts.method, path: opts.path, headers: opts.headers, body: opts.body, signal: opts.signal });
    },
    retries,
    close: async () => {
      await Promise.all([pool.close(), retryPool?.close()]);
    },
  };
}

const retryConnections = (cfg: UpstreamConfig): number => Math.max(2, Math.ceil(cfg.connections / RETRY_POOL_SHARE));

/** The code of an error thrown by undici (or its cause's), else "error". */
function errorCode(err: unknown): string {
  const errorLike = err as { code?: unknown; cause?: { code?: unknown } } | null;
  if (typeof errorLike?.code === 'string') return errorLike.code;
  return typeof errorLike?.cause?.code === 'string' ? errorLike.cause.code : 'error';
}

/** The retry reason of an error thrown before the response head arrived (retries.ts), or undefined. */
export const transitOfThrown = (err: unknown): TransitReason | undefined => transitOfError(errorCode(err));

/** Classifies an error thrown while talking to an upstream. */
export function classifyUpstreamError(err: unknown): UpstreamFailure {
  if (
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError ||
    err instanceof undiciErrors.ConnectTimeoutError
  ) {
    return { status: 504, detail: (err as { code: string }).code };
  }
  const code = errorCode(err);
  if (code === 'ETIMEDOUT') return { status: 504, detail: code };
  return { status: 502, detail: code };
}

/*
 * The decoded form of a buffered upstream body, read once when the cache receives it: a gzip body
 * is inflated (in libuv's pool, a chunk at a time) so that its JSON can be checked before it is
 * stored, and a body that fails to decode becomes a failure, as a truncated body does. The
 * encoded bytes are what the cache keeps; the decoded ones are checked and dropped.
 *
 * The decoded body is never held whole: each chunk is checked as it comes (json-syntax.ts) and
 * dropped, and the cache's rules get its size, its first bytes and the verdict. So no step on the
 * event loop is larger than a chunk, whatever the body decodes to (a base64 blob of zeros is
 * 100 MB from 300 KB of gzip): no joining of the decoded whole, no parse of it.
 */
/** A body decoded without being held: what the cache's rules read of it. */
export interface CheckedBody {
  /** Bytes decoded. */
  readonly size: number;
  /** Its first bytes (at most HEAD_BYTES): what a rule reads of a body's start (a 401's message). */
  readonly head: Buffer;
  /** Whether it is one JSON text; undefined when its Content-Type is not JSON (not checked). */
  readonly json: boolean | undefined;
}

export type Decoded =
  /** The response, and its body: itself for identity, checked for gzip, undefined for a coding the proxy does not decode. */
  { ok: true; decoded: Buffer | CheckedBody | undefined } | { ok: false; failure: Extract<Fetched, { kind: 'failed' }> };

/** Output chunk of the decoder: the most JSON checked in one turn of the event loop. */
const DECODE_CHUNK = 64 * 1024;
const HEAD_BYTES = 1024;

/**
 * Decodes `fetched`'s body; more than `maxDecodedBytes` decoded (a compression bomb) is a failure
 * too, so that no small upstream body can make the proxy hold a huge one.
 */
export async function decodeFetched(fetched: Extract<Fetched, { kind: 'response' }>, maxDecodedBytes: number): Promise<Decoded> {
  const coding = contentCodingOf(fetched.headers['content-encoding']);
  if (coding === undefined || fetched.body.length === 0) return { ok: true, decoded: fetched.body };
  if (coding !== 'gzip' && coding !== 'x-gzip') return { ok: true, decoded: undefined };
  const json = isJsonMediaType(headerValue(fetched.headers['content-type'])) ? new JsonSyntax() : undefined;
  const read = await inflate(fetched.body, maxDecodedBytes, json);
  if (read.kind === 'checked') return { ok: true, decoded: read.body };
  const detail = read.kind === 'too-large' ? 'decoded body over the limit' : 'body failed to decode (gzip)';
  return { ok: false, failure: { kind: 'failed', failure: { status: 502, detail } } };
}

type Inflated = { kind: 'checked'; body: CheckedBody } | { kind: 'too-large' } | { kind: 'failed' };

/** The gzip `body` inflated as a stream, each chunk checked (`json`, when given) and dropped. */
function inflate(body: Buffer, maxDecodedBytes: number, json: JsonSyntax | undefined): Promise<Inflated> {
  return new Promise((resolve) => {
    const decoder = createGunzip({ chunkSize: DECODE_CHUNK });
    const head: Buffer[] = [];
    let size = 0;
    decoder.on('data', (chunk: Buffer) => {
      if (size < HEAD_BYTES) head.push(chunk.subarray(0, HEAD_BYTES - size));
      size += chunk.length;
      if (size > maxDecodedBytes) {
        decoder.destroy();
        resolve({ kind: 'too-large' });
        return;
      }
      if (json?.valid === true) json.write(chunk);
    });
    decoder.once('end', () => {
      const checked = { size, head: Buffer.concat(head), json: json === undefined ? undefined : json.valid && json.end() };
      resolve({ kind: 'checked', body: checked });
    });
    decoder.once('error', () => resolve({ kind: 'failed' }));
    decoder.end(body);
  });
}
