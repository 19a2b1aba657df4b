/**
 * GitHub's webhook signature: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body, keyed
 * with the webhook's secret>`. Checked over the bytes as received, before anything is parsed, and
 * compared in constant time. A missing, repeated or malformed header is a mismatch.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const SIGNATURE = /^sha256=([0-9a-fA-F]{64})$/;

/** The header value GitHub sends for `body` signed with `secret`. */
export function signatureOf(secret: string, body: Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** Whether `header` has the form of a signature (one `sha256=` and 64 hex digits): checked before the body is read. */
export function wellFormedSignature(header: string | string[] | undefined): boolean {
  return typeof header === 'string' && SIGNATURE.test(header.trim());
}

/** Whether `header` is the signature of `body` with `secret`. */
export function verifySignature(secret: string, body: Buffer, header: string | string[] | undefined): boolean {
  if (typeof header !== 'string') return false;
  const match = SIGNATURE.exec(header.trim());
  if (match === null) return false;
  const given = Buffer.from(match[1]!, 'hex');
  const expected = createHmac('sha256', secret).update(body).digest();
  return given.length === expected.length && timingSafeEqual(given, expected);
}
