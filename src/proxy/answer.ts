/**
 * The one place that writes a client response. `answer(ctx, reply)` writes a reply value (see
 * reply.ts) and hands back what the log line and the metrics record.
 *
 * The hit path is one writeHead with a header list flattened once per entry, and one end(buffer).
 * Link headers, and the Location of a redirect or a 201, that point at the upstream are rewritten
 * to the proxy's public base (link.ts: public_url, trusted forwarded headers, or the request's own
 * Host), at serve time and never stored; a client that already holds the representation
 * (If-None-Match / If-Modified-Since) gets a 304.
 */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { CacheEntry } from '../cache/entry.js';
import { REPRESENTATION_FRAMING } from '../cache/policy.js';
import { clientHasCurrent } from '../headers/conditional.js';
import { publicBase, rewriteLink, rewriteLocation, rewritesLocation, withRoutePrefix, type LinkRewrite } from '../headers/link.js';
import type { RequestContext } from './context.js';
import { errorBody } from './errors.js';
import type { ErrorReply, Reply, Served } from './reply.js';

export interface LinkSettings {
  publicUrl: string | null;
  trustForwarded: boolean;
}

export function answer(ctx: RequestContext, reply: Reply): Served {
  switch (reply.kind) {
    case 'entry':
      writeEntry(ctx, reply.entry, reply.cacheStatus, reply.age, reply.extra);
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

function writeStream(ctx: RequestContext, reply: Extract<Reply, { kind: 'stream' }>): void {
  const { res } = ctx;
  const { rest } = reply;
  if (res.destroyed) {
    rest?.destroy(); // the client has gone: nothing to answer
    return;
  }
  reply.headers['x-request-id'] = ctx.id;
  rewriteLinkHeaders(ctx, reply.status, reply.headers);
  res.writeHead(reply.status, reply.headers);
  if (reply.headersOnly) {
    // The fetch was a GET (entries serve both), but a HEAD answer is complete with its headers: it
    // goes out now, and the body, which it would never carry, is dropped. Streamed into the HEAD
    // response, that body held the answer back until its last byte (Node sends a HEAD's headers at
    // end()), and an upstream failing in the middle of it cut a connection whose answer needed none of it.
    res.end();
    rest?.destroy(); // fetchBuffered left an error listener on it
    return;
  }
  if (rest === undefined) {
    res.end(reply.head.length === 1 ? reply.head[0] : Buffer.concat(reply.head));
    return;
  }
  for (const chunk of reply.head) res.write(chunk);
  streamTo(rest, res, reply.onBodyError);
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

/** Stored headers flattened once per entry: [name, value, name, value, ..., 'content-length', n]. */
const flatCache = new WeakMap<CacheEntry, string[]>();
/** Entries that carry a Link header, or a Location to rewrite (the only ones needing per-request work). */
const hasLink = new WeakSet<CacheEntry>();
/** Per entry, the flattened headers with Link and Location rewritten for the last public base seen. */
const linkCache = new WeakMap<CacheEntry, { base: string; flat: string[] }>();
/** Per entry, its headers followed by the last `extra` list seen (the pool's headers change about once a second). */
const extraCache = new WeakMap<CacheEntry, { extra: readonly string[]; stored: string[]; flat: string[] }>();

function flatten(entry: CacheEntry): string[] {
  let flat = flatCache.get(entry);
  if (flat === undefined) {
    flat = [];
    for (const [name, value] of entry.headers) {
      flat.push(name, value);
      if (name === 'link' || (name === 'location' && rewritesLocation(entry.status))) hasLink.add(entry);
    }
    flat.push('content-length', String(entry.body.length));
    flatCache.set(entry, flat);
  }
  return flat;
}

/**
 * Per upstream, the last proxy base and what it was built from (`public_url`, else the Host value):
 * clients mostly send one Host, so a hit compares one string instead of validating it and building
 * a URL. Not used with trust_forwarded (the base then depends on more than one header).
 */
const baseMemo = new WeakMap<RequestContext['upstream'], { from: string; base: string | undefined }>();

/** The proxy base URL that Link and Location headers should point at for this request, or undefined (no rewrite). */
function proxyBaseFor(ctx: RequestContext): string | undefined {
  const headers = ctx.req.headers;
  const { links, cfg } = ctx.upstream;
  const from = links.publicUrl ?? (links.trustForwarded ? undefined : (headers.host ?? ''));
  const memo = from === undefined ? undefined : baseMemo.get(ctx.upstream);
  if (memo !== undefined && memo.from === from) return memo.base;
  const found = publicBase(links.publicUrl, links.trustForwarded, (name) => {
    const value = headers[name];
    return Array.isArray(value) ? value[0] : value;
  });
  const base = found === undefined ? undefined : withRoutePrefix(found, cfg.strip_prefix, cfg.prefix);
  if (from !== undefined) baseMemo.set(ctx.upstream, { from, base });
  return base;
}

/** Rewrites Link and Location of a response that is not served from an entry (streamed answers). */
function rewriteLinkHeaders(ctx: RequestContext, status: number, headers: Record<string, string | string[]>): void {
  const { link, location } = headers;
  const locationToo = location !== undefined && rewritesLocation(status);
  if (link === undefined && !locationToo) return;
  const proxyBase = proxyBaseFor(ctx);
  if (proxyBase === undefined) return;
  const rewrite: LinkRewrite = { upstreamBase: ctx.upstream.linkBase, proxyBase };
  if (link !== undefined)
    headers.link = Array.isArray(link) ? link.map((value) => rewriteLink(value, rewrite)) : rewriteLink(link, rewrite);
  if (locationToo)
    headers.location = Array.isArray(location)
      ? location.map((value) => rewriteLocation(value, rewrite))
      : rewriteLocation(location, rewrite);
}

function headersFor(ctx: RequestContext, entry: CacheEntry): string[] {
  const flat = flatten(entry);
  if (!hasLink.has(entry)) return flat;
  const proxyBase = proxyBaseFor(ctx);
  if (proxyBase === undefined) return flat;
  const memo = linkCache.get(entry);
  if (memo !== undefined && memo.base === proxyBase) return memo.flat;
  const out = flat.slice();
  const rewrite: LinkRewrite = { upstreamBase: ctx.upstream.linkBase, proxyBase };
  const locationToo = rewritesLocation(entry.status);
  for (let i = 0; i < out.length; i += 2) {
    if (out[i] === 'link') out[i + 1] = rewriteLink(out[i + 1]!, rewrite);
    else if (locationToo && out[i] === 'location') out[i + 1] = rewriteLocation(out[i + 1]!, rewrite);
  }
  linkCache.set(entry, { base: proxyBase, flat: out });
  return out;
}

function withExtra(entry: CacheEntry, stored: string[], extra: readonly string[]): string[] {
  const memo = extraCache.get(entry);
  if (memo !== undefined && memo.extra === extra && memo.stored === stored) return memo.flat;
  const flat = stored.concat(extra);
  extraCache.set(entry, { extra, stored, flat });
  return flat;
}

function writeEntry(ctx: RequestContext, entry: CacheEntry, status: string, age: number, extra: readonly string[] | undefined): void {
  const { req, res } = ctx;
  const stored = headersFor(ctx, entry);
  const inm = req.headers['if-none-match'];
  const ims = req.headers['if-modified-since'];
  if ((inm !== undefined || ims !== undefined) && entry.status === 200 && clientHasCurrent(inm, ims, entry.etag, entry.lastModified)) {
    const out: string[] = [];
    for (let i = 0; i < stored.length; i += 2) if (!REPRESENTATION_FRAMING.has(stored[i]!)) out.push(stored[i]!, stored[i + 1]!);
    out.push('age', String(age), 'cache-status', status, 'x-request-id', ctx.id);
    if (extra !== undefined) for (const value of extra) out.push(value);
    res.writeHead(304, out);
    res.end();
    return;
  }
  const base = extra === undefined ? stored : withExtra(entry, stored, extra);
  res.writeHead(entry.status, base.concat('age', String(age), 'cache-status', status, 'x-request-id', ctx.id));
  if (ctx.method === 'HEAD') res.end();
  else res.end(entry.body);
}
