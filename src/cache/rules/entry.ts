/**
 * Pure: the cache entry, as every tier and rule sees it, and its readers: the validators a
 * revalidation sends, and negative entries (a stored 404 or 410). Its binary encoding for Redis is
 * the store's (src/cache/store/entry-codec.ts).
 */
import { parseHttpDate } from '../../http/headers/fields.js';
import type { PolicyKind, FreshnessPolicy } from './policy.js';
import { ownerTag, repoTag } from './tags.js';

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

/*
 * Pure: the validators a stored entry is revalidated with (RFC 9111 section 4.3.1). Normally its
 * ETag (If-None-Match), else its Last-Modified (If-Modified-Since); under `rfc9111` both, as
 * section 4.3.1 says (the ETag MUST be sent, Last-Modified SHOULD be too). The GitHub policies send
 * the ETag, else Last-Modified: GitHub's ETag is the validator that counts. What a 304 then does
 * to the entry is freshen.ts.
 *
 * GitHub's ETag depends on the credential: once a pool token has a new value (an App installation
 * token re-minted every hour, a rotated token), the old value's ETag never matches and the
 * revalidation is a full 200 that spends quota. Under `cache.rotated_token_revalidation:
 * last_modified`, an entry that the same pool token fetched with another value is revalidated with
 * If-Modified-Since instead, which does not depend on the credential; the 304 (free) carries the
 * new value's ETag, which the merge stores (RFC 9111 4.3.4), so the next revalidation uses it.
 *
 * Only when Last-Modified is a validator one can rely on: at least one second older than the
 * entry's Date (RFC 9110 8.8.2.2), so that a change made in the same second as the one the entry
 * shows is not mistaken for no change. Otherwise, and for another token's entry (a switch), the
 * ETag as always.
 */
export type RotatedTokenRevalidation = 'etag' | 'last_modified';

/** A representation's validators. */
export interface Validators {
  readonly etag: string | undefined;
  readonly lastModified: string | undefined;
}

/** What a revalidation knows of the stored entry. */
export interface StoredValidators extends Validators {
  /** The entry's Date header (of the response, or of the last 304 that confirmed it). */
  readonly date: string | undefined;
  /** The pool token that fetched it, and the id of its value then (when recorded). */
  readonly token: string | undefined;
  readonly credential: string | undefined;
}

/** The pool token (name, and id of its current value) a revalidation is sent with. */
export interface SendingToken {
  readonly name: string;
  readonly credential: string;
}

/**
 * A revalidation's validators on whichever token it goes out on, as data for the pool
 * (src/pool/pooled-fetch.ts takes this shape): `headers` on every token, but `rotated.headers` on
 * `rotated.token` once its value is another than the one of id `rotated.credential`.
 */
export interface ValidatorsByToken {
  readonly headers: Readonly<Record<string, string>>;
  readonly rotated?: { readonly token: string; readonly credential: string; readonly headers: Readonly<Record<string, string>> };
}

/** Whether Last-Modified can stand for the representation: at least a second older than Date (RFC 9110 8.8.2.2). */
export function lastModifiedValidates(lastModified: string | undefined, date: string | undefined): boolean {
  if (lastModified === undefined || date === undefined) return false;
  const modified = parseHttpDate(lastModified);
  const dated = parseHttpDate(date);
  return modified !== undefined && dated !== undefined && dated - modified >= 1000;
}

/** The preconditions of a revalidation under `policy`: the ETag, else Last-Modified; both under `rfc9111`. */
export function revalidationHeaders(stored: Validators, policy: PolicyKind): Record<string, string> {
  const out: Record<string, string> = {};
  if (stored.etag !== undefined) out['if-none-match'] = stored.etag;
  if (stored.lastModified !== undefined && (policy === 'rfc9111' || stored.etag === undefined))
    out['if-modified-since'] = stored.lastModified;
  return out;
}

/** If-Modified-Since alone, for the token that fetched `stored` once it has another value (when the mode and the dates allow). */
function onRotatedToken(stored: StoredValidators, mode: RotatedTokenRevalidation): ValidatorsByToken['rotated'] {
  const { etag, lastModified, token, credential } = stored;
  if (mode !== 'last_modified' || etag === undefined || token === undefined || credential === undefined) return undefined;
  if (!lastModifiedValidates(lastModified, stored.date)) return undefined;
  return { token, credential, headers: { 'if-modified-since': lastModified! } };
}

/** The conditional request headers to revalidate `stored` with, per token (none without an entry). */
export function validatorsByToken(
  stored: StoredValidators | undefined,
  mode: RotatedTokenRevalidation,
  policy: PolicyKind = 'max-age',
): ValidatorsByToken {
  if (stored === undefined) return { headers: {} };
  const headers = revalidationHeaders(stored, policy);
  const rotated = onRotatedToken(stored, mode);
  return rotated === undefined ? { headers } : { headers, rotated };
}

/** The conditional request headers to revalidate `stored` with when sent on `sending` (none without an entry). */
export function validatorsFor(
  stored: StoredValidators | undefined,
  sending: SendingToken | undefined,
  mode: RotatedTokenRevalidation,
  policy: PolicyKind = 'max-age',
): Record<string, string> {
  const { headers, rotated } = validatorsByToken(stored, mode, policy);
  const isRotated = rotated !== undefined && sending?.name === rotated.token && sending.credential !== rotated.credential;
  return { ...(isRotated ? rotated.headers : headers) };
}

/** What a revalidation of `entry` knows of it. */
export function storedValidators(entry: CacheEntry): StoredValidators {
  const by = entry.fetchedBy;
  return {
    etag: entry.etag,
    lastModified: entry.lastModified,
    date: fieldValue(entry.headers, 'date'),
    token: by.kind === 'pool' ? by.token : undefined,
    credential: by.kind === 'pool' ? by.credential : undefined,
  };
}

/*
 * Pure: negative entries. Under the GitHub policies (`max-age`, `revalidate`, `ttl`) a 404 or 410
 * answer to a GET is stored in its credential partition for `upstreams[].cache.negative_seconds`
 * (0: never): every authenticated 404 costs a unit of quota, and clients poll for things that do
 * not exist yet. It is never served stale (no stale-if-error, no stale-while-revalidate, no
 * max-stale) and never refreshed ahead. Under `rfc9111` the RFC's rules decide, as for any status.
 *
 * A negative entry is filed (src/cache/store/tags.ts) under the repository and owner of its path,
 * so that a webhook delivery that could create it purges it (webhook-tags.ts); a 200 for its key
 * replaces it.
 */
export function isNegativeStatus(status: number): boolean {
  return status === 404 || status === 410;
}

/** How long a negative answer is fresh, seconds; undefined when it is not stored as one. */
export function negativeLifetime(policy: FreshnessPolicy, status: number, method: 'GET' | 'HEAD'): number | undefined {
  if (!isNegativeStatus(status) || method !== 'GET') return undefined;
  if (policy.kind === 'rfc9111' || policy.kind === 'none') return undefined;
  const seconds = policy.negativeSeconds ?? 0;
  return seconds > 0 ? seconds : undefined;
}

/** The entry as a negative one: fresh for `seconds`, never served stale. */
export function asNegative(entry: CacheEntry, seconds: number): CacheEntry {
  return { ...entry, lifetime: seconds, staleIfError: 0, staleWhileRevalidate: 0, mustRevalidate: true };
}

/**
 * The tags of an API path's negative entry: `/repos/<owner>/<name>/...` is the repository and its
 * owner; `/users/<login>...`, `/orgs/<login>...` the account. Other paths have none (they expire).
 */
export function pathTags(apiPath: string): string[] {
  const [, first, owner, name] = apiPath.split('/', 4);
  const tags: Array<string | undefined> = [];
  const decoded = (text: string | undefined): string | undefined => {
    if (text === undefined) return undefined;
    try {
      return decodeURIComponent(text);
    } catch {
      return undefined;
    }
  };
  if (first === 'repos') tags.push(repoTag(decoded(owner), decoded(name)), ownerTag(decoded(owner)));
  else if (first === 'users' || first === 'orgs') tags.push(ownerTag(decoded(owner)));
  return tags.filter((tag): tag is string => tag !== undefined);
}
