/**
 * Pure: the validators a stored entry is revalidated with. Normally its ETag (If-None-Match), else
 * its Last-Modified (If-Modified-Since).
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
import { poolCredentialOf, poolTokenOf, type CacheEntry } from '../store/entry.js';
import { revalidationHeaders } from './freshen.js';
import type { PolicyKind } from './policy.js';

export type RotatedTokenRevalidation = 'etag' | 'last_modified';

/** What a revalidation knows of the stored entry. */
export interface StoredValidators {
  readonly etag: string | undefined;
  readonly lastModified: string | undefined;
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

/** Whether Last-Modified can stand for the representation: at least a second older than Date (RFC 9110 8.8.2.2). */
export function lastModifiedValidates(lastModified: string | undefined, date: string | undefined): boolean {
  if (lastModified === undefined || date === undefined) return false;
  const modified = Date.parse(lastModified);
  const dated = Date.parse(date);
  return Number.isFinite(modified) && Number.isFinite(dated) && dated - modified >= 1000;
}

/** Whether `sending` is the token that fetched the entry, with a value it did not have then. */
function rotated(stored: StoredValidators, sending: SendingToken | undefined): boolean {
  return (
    sending !== undefined && stored.credential !== undefined && stored.token === sending.name && stored.credential !== sending.credential
  );
}

/** The conditional request headers to revalidate `stored` with (none without an entry). */
export function validatorsFor(
  stored: StoredValidators | undefined,
  sending: SendingToken | undefined,
  mode: RotatedTokenRevalidation,
  policy: PolicyKind = 'max-age',
): Record<string, string> {
  if (stored === undefined) return {};
  const { etag, lastModified } = stored;
  if (etag !== undefined && mode === 'last_modified' && rotated(stored, sending) && lastModifiedValidates(lastModified, stored.date)) {
    return { 'if-modified-since': lastModified! };
  }
  // The ETag, else Last-Modified; under rfc9111 both (RFC 9111 section 4.3.1, freshen.ts).
  return revalidationHeaders(stored, policy);
}

/** What a revalidation of `entry` knows of it. */
export function storedValidators(entry: CacheEntry): StoredValidators {
  let date: string | undefined;
  for (const [name, value] of entry.headers) if (name === 'date') date = value;
  return {
    etag: entry.etag,
    lastModified: entry.lastModified,
    date,
    token: poolTokenOf(entry.fetchedBy),
    credential: poolCredentialOf(entry.fetchedBy),
  };
}
