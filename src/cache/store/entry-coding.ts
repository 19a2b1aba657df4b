/**
 * The content coding of a stored entry, as the forms served from it see it.
 * Entries keep the body as the upstream sent it, gzip when it was asked for gzip; a client that
 * takes gzip gets those bytes, one that does not gets them decoded. `Cache-Control: no-transform`
 * forbids the proxy to change the coding (RFC 9110 section 7.7): such an entry is served as stored
 * to a client that takes its coding (or sent no Accept-Encoding), and never to one that refused it
 * (the cached path forwards that client's request instead: cached.ts).
 */
import { kMaxLength } from 'node:buffer';
import { gunzipSync, gzipSync } from 'node:zlib';
import { contentCodingOf } from '../../http/representation.js';
import { parseCacheControl } from '../../http/headers/fields.js';
import { ownedCopy } from '../../platform/owned-bytes.js';

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
 * body in the shared slab) the output is copied to an allocation of its own size (owned-bytes.ts).
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
