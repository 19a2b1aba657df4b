/**
 * Writes a stored entry to the client. The hit path: one writeHead with a pre-flattened header
 * list and one end(buffer). Link headers are rewritten to the proxy's public base; a client that
 * already holds the representation (If-None-Match / If-Modified-Since) gets a 304.
 */
import type { CacheEntry } from '../cache/entry.js';
import { clientHasCurrent } from '../headers/conditional.js';
import { publicBase, rewriteLink } from '../headers/link.js';
import type { Exchange } from './exchange.js';

export interface LinkSettings {
  publicUrl: string | null;
  trustForwarded: boolean;
}

/** Stored headers flattened once per entry: [name, value, name, value, ..., 'content-length', n]. */
const flatCache = new WeakMap<CacheEntry, string[]>();
/** Entries that carry a Link header (the only ones needing per-request work). */
const hasLink = new WeakSet<CacheEntry>();
/** Per entry, the flattened headers with Link rewritten for the last public base seen. */
const linkCache = new WeakMap<CacheEntry, { base: string; flat: string[] }>();

function flatten(entry: CacheEntry): string[] {
  let flat = flatCache.get(entry);
  if (flat === undefined) {
    flat = [];
    for (const [k, v] of entry.headers) {
      flat.push(k, v);
      if (k === 'link') hasLink.add(entry);
    }
    flat.push('content-length', String(entry.body.length));
    flatCache.set(entry, flat);
  }
  return flat;
}

/** The proxy base URL that Link headers should point at for this request, or undefined (no rewrite). */
function proxyBaseFor(x: Exchange, links: LinkSettings): string | undefined {
  const h = x.req.headers;
  const base = publicBase(links.publicUrl, links.trustForwarded, (n) => {
    const v = h[n];
    return Array.isArray(v) ? v[0] : v;
  });
  if (base === undefined) return undefined;
  const cfg = x.upstream.cfg;
  return base + (cfg.strip_prefix && cfg.prefix !== '/' ? cfg.prefix : '');
}

/** Rewrites the Link header of a response that is not served from an entry (streamed answers). */
export function rewriteLinkHeaders(x: Exchange, headers: Record<string, string | string[]>, links: LinkSettings): void {
  const link = headers.link;
  if (link === undefined) return;
  const proxyBase = proxyBaseFor(x, links);
  if (proxyBase === undefined) return;
  const r = { upstreamBase: x.upstream.linkBase, proxyBase };
  headers.link = Array.isArray(link) ? link.map((v) => rewriteLink(v, r)) : rewriteLink(link, r);
}

function headersFor(x: Exchange, entry: CacheEntry, links: LinkSettings): string[] {
  const flat = flatten(entry);
  if (!hasLink.has(entry)) return flat;
  const proxyBase = proxyBaseFor(x, links);
  if (proxyBase === undefined) return flat;
  const memo = linkCache.get(entry);
  if (memo !== undefined && memo.base === proxyBase) return memo.flat;
  const out = flat.slice();
  for (let i = 0; i < out.length; i += 2) {
    if (out[i] === 'link') out[i + 1] = rewriteLink(out[i + 1]!, { upstreamBase: x.upstream.linkBase, proxyBase });
  }
  linkCache.set(entry, { base: proxyBase, flat: out });
  return out;
}

/** Per entry, its headers followed by the last `extra` list seen (the pool's headers change about once a second). */
const extraCache = new WeakMap<CacheEntry, { extra: readonly string[]; stored: string[]; flat: string[] }>();

function withExtra(entry: CacheEntry, stored: string[], extra: readonly string[]): string[] {
  const memo = extraCache.get(entry);
  if (memo !== undefined && memo.extra === extra && memo.stored === stored) return memo.flat;
  const flat = stored.concat(extra);
  extraCache.set(entry, { extra, stored, flat });
  return flat;
}

/** Representation headers left out of a 304 (RFC 9110 section 15.4.5). */
const NOT_ON_304 = new Set(['content-length', 'content-encoding', 'content-range', 'content-type', 'transfer-encoding']);

/** `extra`: [name, value, ...] appended to the stored headers (the pool's rate-limit headers). */
export function sendEntry(x: Exchange, entry: CacheEntry, status: string, age: number, links: LinkSettings, extra?: readonly string[]): void {
  const { req, res } = x;
  const stored = headersFor(x, entry, links);
  const inm = req.headers['if-none-match'];
  const ims = req.headers['if-modified-since'];
  if ((inm !== undefined || ims !== undefined) && entry.status === 200 && clientHasCurrent(inm, ims, entry.etag, entry.lastModified)) {
    const out: string[] = [];
    for (let i = 0; i < stored.length; i += 2) if (!NOT_ON_304.has(stored[i]!)) out.push(stored[i]!, stored[i + 1]!);
    out.push('age', String(age), 'cache-status', status, 'x-request-id', x.id);
    if (extra !== undefined) for (const v of extra) out.push(v);
    res.writeHead(304, out);
    res.end();
    return;
  }
  const base = extra === undefined ? stored : withExtra(entry, stored, extra);
  res.writeHead(entry.status, base.concat('age', String(age), 'cache-status', status, 'x-request-id', x.id));
  if (x.method === 'HEAD') res.end();
  else res.end(entry.body);
}
