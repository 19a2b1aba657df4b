/**
 * Pure: what a 304 does to a stored response. Under `rfc9111`, which stored response it freshens
 * (RFC 9111 section 4.3.4) and which of its header fields it updates (section 3.2); the validators
 * the revalidation sent are in entry.ts.
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
import type { Validators } from './entry.js';

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
