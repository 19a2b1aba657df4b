/**
 * Pure revalidation: the validators a revalidation sends (below), and what a 304 does to a stored
 * response. Under `rfc9111`, which stored response it freshens (RFC 9111 section 4.3.4) and which
 * of its header fields it updates (section 3.2).
 *
 * Selection (section 4.3.4, first match; the proxy holds one stored response per key):
 *   - the 304 carries a strong ETag: it selects the stored response only if that one has the same
 *     strong ETag (strong comparison, RFC 9110 section 8.8.3.2); otherwise it "MUST NOT" update it;
 *   - it carries weak validators (a weak ETag, Last-Modified): they must correspond to the stored
 *     response's (weak comparison for the ETag, the same instant for Last-Modified): at least one is
 *     on both and none differs;
 *   - it carries no validator: it selects the stored response only if that one has none either.
 * A 304 that selects nothing updates nothing: the cache asks again without validators
 * (src/paths/rest/cached.ts), and a different ETag never enters the stored response.
 *
 * The GitHub policies keep their documented rule: a 304 confirms the entry it answered.
 */
import { parseHttpDate } from '../../http/headers/fields.js';
import type { PolicyKind } from './policy.js';
import { fieldValue, type CacheEntry } from './entry.js';

const isWeak = (tag: string): boolean => tag.startsWith('W/');
const opaque = (tag: string): string => (isWeak(tag) ? tag.slice(2) : tag);

/** The same instant (HTTP dates may be written differently), else the same text. */
function sameDate(left: string, right: string): boolean {
  const [leftTime, rightTime] = [parseHttpDate(left), parseHttpDate(right)];
  return leftTime === undefined || rightTime === undefined ? left.trim() === right.trim() : leftTime === rightTime;
}

/** Whether a 304 with `notModified`'s validators selects the stored response with `stored`'s (section 4.3.4). */
export function selectedBy304(stored: Validators, notModified: Validators): boolean {
  const etag = notModified.etag?.trim();
  const lastModified = notModified.lastModified?.trim();
  if (etag !== undefined && !isWeak(etag)) {
    const storedTag = stored.etag?.trim();
    return storedTag !== undefined && !isWeak(storedTag) && storedTag === etag;
  }
  if (etag === undefined && lastModified === undefined) return stored.etag === undefined && stored.lastModified === undefined;
  const compared: boolean[] = [];
  if (etag !== undefined && stored.etag !== undefined) compared.push(opaque(stored.etag.trim()) === opaque(etag));
  if (lastModified !== undefined && stored.lastModified !== undefined) compared.push(sameDate(stored.lastModified, lastModified));
  return compared.length > 0 && compared.every(Boolean);
}

/** Whether a 304 may update `stored` under this policy (only `rfc9111` selects; the others always confirm). */
export function freshens(policy: PolicyKind, stored: Validators, notModified: Validators): boolean {
  return policy !== 'rfc9111' || selectedBy304(stored, notModified);
}

/**
 * The header fields a 304 never overwrites in a stored response under `rfc9111` (section 3.2):
 *   content-length     named by the section
 *   content-range      "automatically processed and removed by the recipient"
 *   transfer-encoding  excepted from storage (section 3.1: hop-by-hop), never stored anyway
 *   content-encoding   the coding of the stored bytes, which the 304 does not resend: the stored
 *                      response depends on it
 *   content-md5, content-digest, repr-digest, digest
 *                      integrity checks of the stored bytes (a 304's Content-Digest describes
 *                      its own empty content): kept "to assure integrity of the stored response"
 * Everything else is updated, Content-Type included: the proxy stores the bytes as received, not a
 * result of processing them.
 */
export const KEPT_ON_304 = new Set([
  'content-length',
  'content-range',
  'transfer-encoding',
  'content-encoding',
  'content-md5',
  'content-digest',
  'repr-digest',
  'digest',
]);

/*
 * The validators a stored entry is revalidated with (RFC 9111 section 4.3.1). Normally its
 * ETag (If-None-Match), else its Last-Modified (If-Modified-Since); under `rfc9111` both, as
 * section 4.3.1 says (the ETag MUST be sent, Last-Modified SHOULD be too). The GitHub policies send
 * the ETag, else Last-Modified: GitHub's ETag is the validator that counts.
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
