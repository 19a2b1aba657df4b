/**
 * Pure: the cache entry, as every tier and rule sees it, and its readers. Its binary encoding for
 * Redis is the store's (src/cache/store/entry-codec.ts).
 */

export interface CacheEntry {
  /** Upstream status of the stored response (200 for most). */
  status: number;
  /** End-to-end response headers as stored (lower-case names), without Age or Cache-Status. */
  headers: Array<[string, string]>;
  /** The body as received: in the coding its stored Content-Encoding names (gzip), else identity. */
  body: Buffer;
  /** Bytes of the body decoded (its length for identity): the identity Content-Length, and the compression metric. */
  decodedSize: number;
  etag: string | undefined;
  lastModified: string | undefined;
  /** When the response (or the last 304 that refreshed it) was received, ms since epoch. */
  storedAt: number;
  /** Age the response already had when received (RFC 9111 corrected_initial_age), seconds. */
  initialAge: number;
  /**
   * When the representation was last known current upstream, ms since epoch: the request that
   * fetched or confirmed it went upstream then (less the Age it came back with). Unset in entries
   * written before it was recorded. A stale mark made after it does not cover the entry (stale-marks.ts).
   */
  currentAt?: number;
  /** Freshness lifetime from storedAt, seconds, after the upstream's policy is applied. */
  lifetime: number;
  /** Seconds past freshness during which the entry may still be served when the upstream fails. */
  staleIfError: number;
  /** Seconds past freshness during which it may be served while a background revalidation runs. */
  staleWhileRevalidate: number;
  /** Stale serving is forbidden (must-revalidate, proxy-revalidate, s-maxage under rfc9111). */
  mustRevalidate: boolean;
  /** Who fetched it (the last exchange that stored or confirmed it). Never a token's value. */
  fetchedBy: FetchedBy;
  /** Request-header values selected by Vary beyond what the key holds; null when none. */
  vary: Record<string, string> | null;
}

/**
 * Who fetched an entry: nobody's credential; a client credential (its keyed id, key.ts
 * `credentialId`, never the credential); or a pool token, by name, and under
 * `cache.rotated_token_revalidation: last_modified` the keyed id of the value it had then. A
 * revalidation of a pool entry goes to the same token: GitHub's ETag depends on the credential
 * that fetched it (validatorsByToken).
 */
export type FetchedBy =
  | { readonly kind: 'anonymous' }
  | { readonly kind: 'client'; readonly credential: string }
  | { readonly kind: 'pool'; readonly token: string; readonly credential?: string | undefined };

/** The one anonymous fetcher (entries share it). */
export const ANONYMOUS_FETCHER: FetchedBy = { kind: 'anonymous' };

/** The pool token that fetched an entry; undefined for any other fetcher. */
export function poolTokenOf(fetchedBy: FetchedBy): string | undefined {
  return fetchedBy.kind === 'pool' ? fetchedBy.token : undefined;
}

/** A stored header list's field `name`: its lines joined by ", " (RFC 9110 section 5.3), or undefined. */
export function fieldValue(list: ReadonlyArray<[string, string]>, name: string): string | undefined {
  let found: string | undefined;
  for (const [key, value] of list) if (key === name) found = found === undefined ? value : `${found}, ${value}`;
  return found;
}
