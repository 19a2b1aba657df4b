/**
 * The cache entry's versioned binary encoding (one value per entry, ready for Redis); the entry
 * itself is src/cache/rules/entry.ts.
 *
 *   byte 0       format version (ENTRY_VERSION)
 *   bytes 1..6   write stamp: 6 random bytes drawn per encode (per write to L2)
 *   bytes 7..10  metadata length N (uint32, big-endian)
 *   bytes 11..   N bytes of metadata JSON, then the body bytes
 *
 * A value with another version, a bad length or bad JSON decodes to undefined: a miss, never a crash.
 * The stamp tells one write from another without reading the rest: a reader that decoded a value
 * may keep the result and reuse it while the stored value carries the same stamp, metadata length
 * and total length (redis-store.ts, with L1 off), so an unchanged L2 value is not parsed again on every hit.
 * The body's coding (gzip kept as it came, decoded for a client that does not take it) is here too.
 */
import { randomFillSync } from 'node:crypto';
import { ANONYMOUS_FETCHER, type CacheEntry, type FetchedBy } from '../rules/entry.js';
import { FIELD_OVERHEAD, isSharedPair, type HeaderTable } from './header-intern.js';
import { kMaxLength } from 'node:buffer';
import { gunzipSync, gzipSync } from 'node:zlib';
import { contentCodingOf } from '../../http/representation.js';
import { parseCacheControl } from '../../http/headers/fields.js';
import { ownedCopy } from '../../platform/bytes.js';

/**
 * 2: the body is kept in the coding it arrived in (gzip), with its decoded size. 3: the write
 * stamp. 4: `fetchedBy` is an object (rules/entry.ts FetchedBy), no longer a string.
 */
export const ENTRY_VERSION = 4;
/** Bytes before the metadata JSON: version, stamp, metadata length. */
export const ENTRY_HEAD_BYTES = 11;

type Meta = Omit<CacheEntry, 'body'>;

export function encodeEntry(entry: CacheEntry): Buffer {
  const meta: Meta = {
    status: entry.status,
    headers: entry.headers,
    decodedSize: entry.decodedSize,
    etag: entry.etag,
    lastModified: entry.lastModified,
    storedAt: entry.storedAt,
    initialAge: entry.initialAge,
    currentAt: entry.currentAt,
    lifetime: entry.lifetime,
    staleIfError: entry.staleIfError,
    staleWhileRevalidate: entry.staleWhileRevalidate,
    mustRevalidate: entry.mustRevalidate,
    fetchedBy: entry.fetchedBy,
    vary: entry.vary,
  };
  const json = Buffer.from(JSON.stringify(meta));
  const head = Buffer.allocUnsafe(ENTRY_HEAD_BYTES);
  head[0] = ENTRY_VERSION;
  randomFillSync(head, 1, 6);
  head.writeUInt32BE(json.length, 7);
  return Buffer.concat([head, json, entry.body]);
}

/**
 * The write stamp of a stored value as a number (48 bits: exact in a double), or undefined when the value is not of this version or too short to hold its head. Says nothing of
 * whether the rest decodes.
 */
export function entryStamp(buf: Buffer): number | undefined {
  if (buf.length < ENTRY_HEAD_BYTES || buf[0] !== ENTRY_VERSION) return undefined;
  return buf.readUIntBE(1, 6);
}

/** The metadata length a value's head gives (call only when `entryStamp` gave a stamp). */
export const entryMetaLength = (buf: Buffer): number => buf.readUInt32BE(7);

function isHeaderList(value: unknown): value is Array<[string, string]> {
  return (
    Array.isArray(value) && value.every((h) => Array.isArray(h) && h.length === 2 && typeof h[0] === 'string' && typeof h[1] === 'string')
  );
}

/** `value`, as the header's own string when a field `name` holds the same text (one copy in memory, as entries built from a response have). */
function headerString(headers: ReadonlyArray<[string, string]>, name: string, value: string | undefined): string | undefined {
  if (value !== undefined) for (const [key, text] of headers) if (key === name && text === value) return text;
  return value;
}

const num = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const optStr = (v: unknown): v is string | undefined => v === undefined || typeof v === 'string';
const str = (v: unknown): v is string => typeof v === 'string';

/** A stored `fetchedBy` read back (the anonymous one shared), or undefined when it is not one. */
function fetcherOf(value: unknown): FetchedBy | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const by = value as Record<string, unknown>;
  if (by.kind === 'anonymous') return ANONYMOUS_FETCHER;
  if (by.kind === 'client' && str(by.credential)) return { kind: 'client', credential: by.credential };
  if (by.kind !== 'pool' || !str(by.token) || !optStr(by.credential)) return undefined;
  return by.credential === undefined ? { kind: 'pool', token: by.token } : { kind: 'pool', token: by.token, credential: by.credential };
}

/** Bytes a fetcher holds beyond the entry's fixed cost: none for the shared anonymous one. */
function fetcherSize(by: FetchedBy): number {
  if (by.kind === 'anonymous') return 0;
  return 40 + (by.kind === 'client' ? by.credential.length : by.token.length + (by.credential?.length ?? 0));
}

/** `headerTable`: the cache's shared header fields, which the entry's common fields become. */
export function decodeEntry(buf: Buffer | Uint8Array | null | undefined, headerTable?: HeaderTable): CacheEntry | undefined {
  if (buf === null || buf === undefined || buf.length < ENTRY_HEAD_BYTES || buf[0] !== ENTRY_VERSION) return undefined;
  const bytes = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const metaLength = entryMetaLength(bytes);
  const bodyStart = ENTRY_HEAD_BYTES + metaLength;
  if (bodyStart > bytes.length) return undefined;
  let meta: Record<string, unknown>;
  try {
    meta = JSON.parse(bytes.toString('utf8', ENTRY_HEAD_BYTES, bodyStart)) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (
    meta === null ||
    typeof meta !== 'object' ||
    !num(meta.status) ||
    !isHeaderList(meta.headers) ||
    !num(meta.decodedSize) ||
    !optStr(meta.etag) ||
    !optStr(meta.lastModified) ||
    !num(meta.storedAt) ||
    !num(meta.initialAge) ||
    !(meta.currentAt === undefined || num(meta.currentAt)) ||
    !num(meta.lifetime) ||
    !num(meta.staleIfError) ||
    !num(meta.staleWhileRevalidate) ||
    typeof meta.mustRevalidate !== 'boolean' ||
    !(meta.vary === null || (typeof meta.vary === 'object' && !Array.isArray(meta.vary)))
  ) {
    return undefined;
  }
  const fetchedBy = fetcherOf(meta.fetchedBy);
  if (fetchedBy === undefined) return undefined;
  const headers = headerTable === undefined ? meta.headers : headerTable.share(meta.headers);
  return {
    status: meta.status,
    headers,
    body: bytes.subarray(bodyStart),
    decodedSize: meta.decodedSize,
    etag: headerString(headers, 'etag', meta.etag),
    lastModified: headerString(headers, 'last-modified', meta.lastModified),
    storedAt: meta.storedAt,
    initialAge: meta.initialAge,
    ...(meta.currentAt === undefined ? {} : { currentAt: meta.currentAt }),
    lifetime: meta.lifetime,
    staleIfError: meta.staleIfError,
    staleWhileRevalidate: meta.staleWhileRevalidate,
    mustRevalidate: meta.mustRevalidate,
    fetchedBy,
    vary: meta.vary as Record<string, string> | null,
  };
}

/**
 * Approximate bytes an entry holds in memory (for the L1 size bound), calibrated with
 * `npm run bench:memory` (heap and external memory per held entry, no eviction, plus what
 * `Buffer.allocUnsafeSlow` costs outside both: about 200 bytes of allocator bookkeeping per body):
 * about 900 bytes of fixed cost (the entry object, the body's Buffer and its allocation, the header
 * list, the LRU's bookkeeping), the body and the key; per header field of the entry's own, its two
 * strings plus FIELD_OVERHEAD (about 110 bytes: the pair, two string headers, the slot); per shared
 * field (header-intern.ts) only its slot. `etag` and `lastModified` are the header fields' own strings.
 */
export function entrySize(key: string, entry: CacheEntry): number {
  let size = entry.body.length + key.length + 900 + fetcherSize(entry.fetchedBy);
  for (const pair of entry.headers) size += isSharedPair(pair) ? 8 : pair[0].length + pair[1].length + FIELD_OVERHEAD;
  return size;
}

/*
 * The content coding of a stored entry, as the forms served from it see it.
 * Entries keep the body as the upstream sent it, gzip when it was asked for gzip; a client that
 * takes gzip gets those bytes, one that does not gets them decoded. `Cache-Control: no-transform`
 * forbids the proxy to change the coding (RFC 9110 section 7.7): such an entry is served as stored
 * to a client that takes its coding (or sent no Accept-Encoding), and never to one that refused it
 * (the cached path forwards that client's request instead: cached.ts).
 */
export interface EntryCoding {
  /** The body is gzip and the proxy may decode it for a client that does not take gzip. */
  readonly gzip: boolean;
  /**
   * The stored coding when the proxy may not decode it (`no-transform`) or cannot (a coding other
   * than gzip); undefined for identity and for decodable gzip. A client that refuses it must not get the entry.
   */
  readonly fixed: string | undefined;
  /** The stored headers' Vary lists Accept-Encoding already. */
  readonly variesOnCoding: boolean;
  /** `Cache-Control: no-transform`: the body goes out as stored (no decoding, no body URLs rewritten). */
  readonly noTransform: boolean;
}

/** What the stored headers say of the body's coding. */
export function entryCoding(headers: ReadonlyArray<[string, string]>): EntryCoding {
  let coding: string | undefined;
  let noTransform = false;
  let variesOnCoding = false;
  for (const [name, value] of headers) {
    if (name === 'content-encoding') coding = contentCodingOf(value);
    else if (name === 'cache-control') noTransform ||= parseCacheControl(value).noTransform === true;
    else if (name === 'vary') variesOnCoding ||= /(?:^|,)\s*(?:accept-encoding|\*)\s*(?:,|$)/i.test(value);
  }
  const gzip = decodable(coding, noTransform);
  return { gzip, fixed: gzip ? undefined : coding, variesOnCoding, noTransform };
}

/** The proxy may decode a body in `coding` for a client that does not take it: gzip (`x-gzip` is gzip), unless no-transform. */
const decodable = (coding: string | undefined, noTransform: boolean): boolean => (coding === 'gzip' || coding === 'x-gzip') && !noTransform;

/** `fixed` of a streamed answer's headers (see EntryCoding): its coding when the proxy may not or cannot decode it. */
export function fixedCoding(
  contentEncoding: string | string[] | undefined,
  cacheControl: string | string[] | undefined,
): string | undefined {
  const coding = contentCodingOf(contentEncoding);
  if (coding === undefined || decodable(coding, parseCacheControl(cacheControl).noTransform === true)) return undefined;
  return coding;
}

/*
 * zlib's sync output is a view into its output chunk (16 KiB by default), and a chunk under 4 KiB
 * is a slice of Node's shared slab: a memoized body must not pin more than it holds, so that the
 * memos' byte bounds count what they hold (bench/memory.ts showed a gzip body of 1.3 KB pinning
 * more than 16 KB). An entry knows its decoded size, so the chunk is made one byte larger than that
 * (one more than zlib needs to finish in one pass): the output is then a view of nearly all of an
 * allocation of its own, no copy. Otherwise (a wrong size, a value from another replica, a small
 * body in the shared slab) the output is copied to an allocation of its own size (src/platform/bytes.ts).
 */

/** The largest output chunk asked of zlib for one decode (a larger body comes in several chunks and is joined). */
const MAX_CHUNK = 4 * 1024 * 1024;

/**
 * The decoded body of an entry whose `entryCoding` is gzip; `expectedSize` is its stored
 * decodedSize. Undefined when it decodes to more than `maxBytes` (`cache.max_decoded_bytes`): this
 * decode runs on the event loop, so zlib stops at the bound whatever the stored size claims.
 */
export function decodedBody(body: Buffer, expectedSize: number | undefined, maxBytes: number): Buffer | undefined {
  if (expectedSize !== undefined && expectedSize > maxBytes) return undefined;
  const chunkSize = expectedSize === undefined ? undefined : Math.min(MAX_CHUNK, Math.max(64, expectedSize + 1));
  let out: Buffer;
  try {
    out = gunzipSync(body, { ...(chunkSize === undefined ? {} : { chunkSize }), maxOutputLength: Math.min(maxBytes, kMaxLength) });
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') return undefined;
    throw err;
  }
  return out.length === expectedSize && out.buffer.byteLength <= expectedSize + 1 ? out : ownedCopy(out);
}

/** A body the proxy changed (body URLs rewritten) put back into gzip for a client that takes it. */
export const encodedBody = (body: Buffer): Buffer => ownedCopy(gzipSync(body));
