/**
 * The one place that writes a client response. `answer(ctx, reply)` writes a reply value (see
 * reply.ts) and hands back what the log line and the metrics record.
 *
 * The hit path is one head written as a block made once per form of a stored response, with this
 * request's fields appended (header-block.ts), and one end(buffer); where a form has no block, or
 * the self-test of blocks failed, one writeHead with a header list flattened once per form (its
 * per-request values written into slots at its end). The form (coding,
 * Link and Location, body URLs) is resolved for this client before answer() is called
 * (src/cache/store/entry-form.ts); a client that already holds the representation
 * (If-None-Match / If-Modified-Since) gets a 304. Streamed answers have their Link, Location and
 * (with rewrite_body_urls) body addresses rewritten here, at serve time, never stored.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { parseCacheControl, REPRESENTATION_FRAMING, clientHasCurrent, isJsonMediaType } from './headers/fields.js';
import {
  acceptsGzip,
  contentCodingOf,
  rewriteLink,
  rewriteLocation,
  rewritesLocation,
  type LinkRewrite,
  rewriteBodyUrls,
  weakened,
  type PublicAddresses,
} from './representation.js';
import { byteRange, ifRangeHolds, type ByteRange } from './headers/range.js';
import { errorBody } from './errors.js';
import type { ErrorReply, FormReply, Reply, Representation, Served, StreamReply } from './reply.js';
import type { HeadBlocks } from './header-block.js';

/**
 * What `answer()` needs of a request: its request and response, id and method, and where its
 * upstream's addresses point (Link, Location and body URLs of streamed answers).
 */
export interface AnswerContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly id: string;
  readonly method: string;
  readonly upstream: { readonly addresses: PublicAddresses };
  /** Heads written as one block per form (header-block.ts), when the self-test passed; else writeHead. */
  readonly heads?: HeadBlocks | undefined;
}

export function answer(ctx: AnswerContext, reply: Reply): Served {
  switch (reply.kind) {
    case 'form':
      writeForm(ctx, reply);
      break;
    case 'stream':
      writeStream(ctx, reply);
      break;
    case 'body':
      ctx.res.writeHead(reply.status, { ...reply.headers, 'content-length': String(reply.body.length), 'x-request-id': ctx.id });
      ctx.res.end(ctx.method === 'HEAD' ? undefined : reply.body);
      break;
    case 'error':
      writeError(ctx.res, reply, ctx.id);
      break;
  }
  return reply;
}

/** Writes an error reply; outside a routed request too (parse errors, shutdown). Headers already sent: the connection is cut. */
export function writeError(res: ServerResponse, reply: ErrorReply, requestId?: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = errorBody(reply.message);
  const headers: Record<string, string | number> = {
    ...reply.headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': body.length,
    'cache-control': 'no-store',
  };
  if (requestId !== undefined) headers['x-request-id'] = requestId;
  res.writeHead(reply.status, headers);
  res.end(body);
}

/** Writes a small JSON answer of the proxy's own outside a routed request (the webhook receiver's acknowledgements). */
export function writeJson(res: ServerResponse, status: number, value: unknown, requestId: string): void {
  const body = Buffer.from(JSON.stringify(value));
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': body.length,
    'cache-control': 'no-store',
    'x-request-id': requestId,
  });
  res.end(body);
}

function writeStream(ctx: AnswerContext, reply: StreamReply): void {
  const { res } = ctx;
  const { rest } = reply;
  if (res.destroyed) {
    rest?.destroy(); // the client has gone: nothing to answer
    return;
  }
  reply.headers['x-request-id'] = ctx.id;
  rewriteLinkHeaders(ctx, reply.status, reply.headers);
  if (reply.headersOnly) {
    // The fetch was a GET (entries serve both), but a HEAD answer is complete with its headers: it
    // goes out now, and the body, which it would never carry, is dropped. Streamed into the HEAD
    // response, that body held the answer back until its last byte (Node sends a HEAD's headers at
    // end()), and an upstream failing in the middle of it cut a connection whose answer needed none of it.
    res.writeHead(reply.status, reply.headers);
    res.end();
    rest?.destroy(); // fetchBuffered left an error listener on it
    return;
  }
  if (rest === undefined) return writeWhole(ctx, reply);
  if (decodesFor(ctx, reply.headers)) {
    res.writeHead(reply.status, identityStreamHeaders(reply.headers));
    streamTo(decodingStream(reply.head, rest), res, reply.onBodyError);
    return;
  }
  res.writeHead(reply.status, reply.headers);
  for (const chunk of reply.head) res.write(chunk);
  streamTo(rest, res, reply.onBodyError);
}

/**
 * A streamed gzip body (over the entry cap) for a client that does not take gzip is decoded on the
 * way, unless the response forbids it (no-transform): the same rule as for entries (src/cache/store/entry-form.ts).
 */
function decodesFor(ctx: AnswerContext, headers: StreamReply['headers']): boolean {
  const coding = contentCodingOf(headers['content-encoding']);
  if (coding !== 'gzip' && coding !== 'x-gzip') return false;
  if (parseCacheControl(headers['cache-control']).noTransform === true) return false;
  return !acceptsGzip(ctx.req.headers['accept-encoding']);
}

/** The headers of a decoded stream: no coding, no length (chunked), a weak ETag. */
function identityStreamHeaders(headers: StreamReply['headers']): StreamReply['headers'] {
  const out = { ...headers };
  delete out['content-encoding'];
  delete out['content-length'];
  if (typeof out.etag === 'string') out.etag = weakened(out.etag);
  return out;
}

/** The head already read and the rest of a gzip body, decoded; an upstream error fails the decoder, and so does bad gzip. */
function decodingStream(head: readonly Buffer[], rest: Readable): Readable {
  const decoder = createGunzip();
  rest.on('error', (err) => decoder.destroy(err));
  decoder.once('close', () => rest.destroy());
  for (const chunk of head) decoder.write(chunk);
  rest.pipe(decoder);
  return decoder;
}

/**
 * A streamed answer whose body was read whole (an uncacheable one under the entry cap): its API
 * addresses are rewritten like an entry's (not memoized: nothing will serve it again), unless it
 * carries `no-transform`.
 */
function writeWhole(ctx: AnswerContext, reply: StreamReply): void {
  const body = reply.head.length === 1 ? reply.head[0]! : Buffer.concat(reply.head);
  const rewritten = rewrittenStreamBody(ctx, reply.headers, body);
  if (rewritten !== undefined) {
    reply.headers['content-length'] = String(rewritten.length);
    const etag = reply.headers.etag;
    if (typeof etag === 'string') reply.headers.etag = weakened(etag);
  }
  ctx.res.writeHead(reply.status, reply.headers);
  ctx.res.end(rewritten ?? body);
}

function rewrittenStreamBody(ctx: AnswerContext, headers: StreamReply['headers'], body: Buffer): Buffer | undefined {
  const contentType = headers['content-type'];
  const { addresses } = ctx.upstream;
  if (!addresses.bodies || typeof contentType !== 'string' || !isJsonMediaType(contentType)) return undefined;
  if (headers['content-encoding'] !== undefined) return undefined;
  if (parseCacheControl(headers['cache-control']).noTransform === true) return undefined; // RFC 9110 section 7.7
  const base = addresses.proxyBase(ctx.req.headers);
  return base === undefined ? undefined : rewriteBodyUrls(body, addresses.upstreamBase, base);
}

/**
 * Pipes an upstream body to the client. Plain `pipe` rather than stream.pipeline, whose per-call
 * AbortController and DOMException showed in profiles. An upstream error cuts the client
 * connection (never a silent short body); a client that leaves destroys the upstream body, and
 * so does one that left before the body was handed over (its 'close' has been and gone: an
 * unread body would hold its upstream connection for good, since undici's body timeout does
 * not run while the body is paused).
 */
function streamTo(body: Readable, res: ServerResponse, onUpstreamError: (err: unknown) => void): void {
  body.on('error', (err) => {
    if (res.destroyed || res.writableFinished) return; // we destroyed it because the client left
    onUpstreamError(err);
    res.destroy();
  });
  if (res.destroyed) {
    body.destroy();
    return;
  }
  res.once('close', () => {
    if (!res.writableFinished) body.destroy();
  });
  body.pipe(res);
}

/** Rewrites Link and Location of a response that is not served from an entry (streamed answers). */
function rewriteLinkHeaders(ctx: AnswerContext, status: number, headers: Record<string, string | string[]>): void {
  const { link, location } = headers;
  const locationToo = location !== undefined && rewritesLocation(status);
  if (link === undefined && !locationToo) return;
  const { addresses } = ctx.upstream;
  const proxyBase = addresses.proxyBase(ctx.req.headers);
  if (proxyBase === undefined) return;
  const rewrite: LinkRewrite = { upstreamBase: addresses.upstreamBase, proxyBase };
  if (link !== undefined)
    headers.link = Array.isArray(link) ? link.map((value) => rewriteLink(value, rewrite)) : rewriteLink(link, rewrite);
  if (locationToo)
    headers.location = Array.isArray(location)
      ? location.map((value) => rewriteLocation(value, rewrite))
      : rewriteLocation(location, rewrite);
}

/**
 * What writeHead gets for a form: its header list, the last `extra` list seen (the pool's headers
 * change about once a second), then three slots filled per request (Age, Cache-Status,
 * X-Request-Id), kept on the form. writeHead reads the list before it returns and keeps no
 * reference to it, so one list serves every hit: no copy of some thirty strings per request.
 */
const PER_REQUEST = ['age', '', 'cache-status', '', 'x-request-id', ''];

function outgoingList(form: Representation, extra: readonly string[] | undefined): string[] {
  const memo = form.outgoing;
  if (memo !== undefined && memo.extra === extra) return memo.list;
  const list = extra === undefined ? form.headers.concat(PER_REQUEST) : form.headers.concat(extra, PER_REQUEST);
  form.outgoing = { extra, list };
  return list;
}

function writeForm(ctx: AnswerContext, reply: FormReply): void {
  const { req, res } = ctx;
  const { form, cacheStatus: status, age, extra } = reply;
  const inm = req.headers['if-none-match'];
  const ims = req.headers['if-modified-since'];
  if ((inm !== undefined || ims !== undefined) && form.status === 200 && clientHasCurrent(inm, ims, form.etag, form.lastModified)) {
    const stored = form.headers;
    const out: string[] = [];
    for (let i = 0; i < stored.length; i += 2) if (!REPRESENTATION_FRAMING.has(stored[i]!)) out.push(stored[i]!, stored[i + 1]!);
    out.push('age', String(age), 'cache-status', status, 'x-request-id', ctx.id);
    if (extra !== undefined) for (const value of extra) out.push(value);
    res.writeHead(304, out);
    res.end();
    return;
  }
  // A form decoded on its way out has no length to cut a range from: the whole body goes.
  if (req.headers.range !== undefined && !form.decode && reply.ranges && rangeServed(ctx, form)) {
    const range = byteRange(req.headers.range, form.body.length);
    if (range.kind !== 'whole') return writeRange(ctx, form, range, [...perRequestFields(age, status, ctx.id), ...(extra ?? [])]);
  }
  // A GET of a form with a block: its head and this request's fields, handed to Node whole (header-block.ts).
  if (ctx.method === 'GET' && ctx.heads?.write(res, form, { extra, age, cacheStatus: status, id: ctx.id }) === true) {
    res.end(form.body);
    return;
  }
  const list = outgoingList(form, extra);
  const end = list.length;
  list[end - 5] = String(age);
  list[end - 3] = status;
  list[end - 1] = ctx.id;
  res.writeHead(form.status, list);
  if (ctx.method === 'HEAD') res.end();
  else if (form.decode) writeDecoded(res, form.body);
  else res.end(form.body);
}

/** Output chunk of a streamed decode: fewer turns of the event loop per body than zlib's 16 KiB. */
const DECODE_CHUNK = 64 * 1024;

/**
 * An entry's gzip body decoded on its way out (over `cache.max_decoded_bytes`: entry-form.ts). zlib
 * works in libuv's pool a chunk at a time and pauses while the socket is full, so neither the event
 * loop nor memory holds the decoded whole. A client that leaves stops the decoder; a body that fails
 * to decode cuts the connection (never a silent short body).
 */
function writeDecoded(res: ServerResponse, body: Buffer): void {
  if (res.destroyed) return; // the client has gone: nothing to decode for
  const decoder = createGunzip({ chunkSize: DECODE_CHUNK });
  decoder.on('error', () => res.destroy());
  res.once('close', () => {
    if (!res.writableFinished) decoder.destroy();
  });
  decoder.pipe(res);
  decoder.end(body);
}

/** The fields every answer of an entry carries for this request. */
const perRequestFields = (age: number, status: string, id: string): string[] => [
  'age',
  String(age),
  'cache-status',
  status,
  'x-request-id',
  id,
];

/**
 * A GET with one byte range is served from a stored complete 200 (RFC 9110 section 14), where the
 * reply allows ranges (`ranges`: under `rfc9111`), unless its If-Range names another version.
 */
function rangeServed(ctx: AnswerContext, form: Representation): boolean {
  if (ctx.method !== 'GET' || form.status !== 200) return false;
  const ifRange = ctx.req.headers['if-range'];
  return !Array.isArray(ifRange) && ifRangeHolds(ifRange, form.etag, form.lastModified);
}

/** A 206 with the part of the client's form of a stored response, or a 416 when the range is past its end. */
function writeRange(ctx: AnswerContext, form: Representation, range: Exclude<ByteRange, { kind: 'whole' }>, perRequest: string[]): void {
  const length = form.body.length;
  const stored = form.headers;
  const out: string[] = [];
  // The form's headers end with its content-length, replaced by the part's.
  for (let i = 0; i < stored.length - 2; i += 2) {
    if (range.kind === 'unsatisfiable' && REPRESENTATION_FRAMING.has(stored[i]!)) continue;
    out.push(stored[i]!, stored[i + 1]!);
  }
  if (range.kind === 'unsatisfiable') {
    out.push('content-range', `bytes */${length}`, 'content-length', '0', ...perRequest);
    ctx.res.writeHead(416, out);
    ctx.res.end();
    return;
  }
  const size = range.end - range.start + 1;
  out.push('content-range', `bytes ${range.start}-${range.end}/${length}`, 'content-length', String(size), ...perRequest);
  ctx.res.writeHead(206, out);
  ctx.res.end(form.body.subarray(range.start, range.end + 1));
}
