/**
 * Validators: weak ETags derived from the body AND the request's Accept, Authorization and
 * X-GitHub-Api-Version (like GitHub, the same body fetched with two tokens has two ETags),
 * Last-Modified dates, and the conditional-request checks (If-None-Match, If-Modified-Since).
 */
import { createHash } from 'node:crypto';

/** A cached, fully rendered response body with its validators. */
export interface Rendered {
  body: Buffer;
  /** The body gzipped, made on the first request that accepts gzip and kept beside it (compression.ts). */
  gzipped?: Buffer;
  hash: string;
  lastModified: number;
  link: string | null;
}

export function bodyHash(body: Buffer | string): string {
  return createHash('sha1').update(body).digest('hex');
}

const etagMemo = new Map<string, string>();

/** W/"<64 hex>"; memoized because the inputs repeat constantly under load. */
export function computeEtag(hash: string, accept: string, authorization: string, apiVersion: string): string {
  const key = `${hash}\n${accept}\n${authorization}\n${apiVersion}`;
  const hit = etagMemo.get(key);
  if (hit !== undefined) return hit;
  const etag = `W/"${createHash('sha256').update(key).digest('hex')}"`;
  if (etagMemo.size >= 20_000) etagMemo.clear();
  etagMemo.set(key, etag);
  return etag;
}

/** Opaque tag without the weak prefix, for weak comparison (RFC 9110 §8.8.3.2). */
function opaque(tag: string): string {
  const trimmed = tag.trim();
  return trimmed.startsWith('W/') ? trimmed.slice(2) : trimmed;
}

/** Whether an If-None-Match header value (a list, or `*`) matches the current ETag. */
export function ifNoneMatchMatches(header: string, etag: string): boolean {
  const current = opaque(etag);
  // Fast path: the client sends back exactly what we sent.
  if (header === etag) return true;
  for (const part of header.split(',')) {
    const tag = part.trim();
    if (tag === '*') return true;
    if (tag !== '' && opaque(tag) === current) return true;
  }
  return false;
}

const httpDateMemo = new Map<number, string>();

/** HTTP date (IMF-fixdate) of an epoch-ms time; memoized per value. */
export function httpDate(ms: number): string {
  const hit = httpDateMemo.get(ms);
  if (hit !== undefined) return hit;
  const formatted = new Date(ms).toUTCString();
  if (httpDateMemo.size >= 10_000) httpDateMemo.clear();
  httpDateMemo.set(ms, formatted);
  return formatted;
}

/** If-Modified-Since: true when the resource was not modified after the given date. */
export function notModifiedSince(header: string, lastModifiedMs: number): boolean {
  const since = Date.parse(header);
  if (Number.isNaN(since)) return false;
  return Math.floor(lastModifiedMs / 1000) * 1000 <= since;
}

/**
 * RFC 9110 §13.2.2 order: If-None-Match is evaluated when present, and If-Modified-Since only
 * when it is absent.
 */
export function isNotModified(
  ifNoneMatch: string | undefined,
  ifModifiedSince: string | undefined,
  etag: string,
  lastModifiedMs: number,
): boolean {
  if (ifNoneMatch !== undefined) return ifNoneMatchMatches(ifNoneMatch, etag);
  if (ifModifiedSince !== undefined) return notModifiedSince(ifModifiedSince, lastModifiedMs);
  return false;
}
