/**
 * Pure evaluation of a client's conditional request against the representation being served
 * (RFC 9110 section 13): If-None-Match with weak comparison, else If-Modified-Since. Dates are read
 * strictly (http-date.ts): an If-Modified-Since that is not an HTTP-date is ignored (section 13.1.3).
 */
import { parseHttpDate } from './http-date.js';

/** The request's preconditions (RFC 9110 section 13.1): what makes a request conditional. */
export const CONDITIONAL_HEADERS = ['if-none-match', 'if-modified-since', 'if-match', 'if-unmodified-since', 'if-range'] as const;

function opaque(tag: string): string {
  const trimmed = tag.trim();
  return trimmed.startsWith('W/') ? trimmed.slice(2) : trimmed;
}

/** True when If-None-Match lists the ETag (weak comparison) or is "*". */
export function etagMatches(ifNoneMatch: string, etag: string | undefined): boolean {
  if (etag === undefined) return false;
  const want = opaque(etag);
  for (const candidate of ifNoneMatch.split(',')) {
    const tag = candidate.trim();
    if (tag === '*' || (tag.length > 0 && opaque(tag) === want)) return true;
  }
  return false;
}

/** Whether the client's own validators say it already has this representation (answer 304). */
export function clientHasCurrent(
  ifNoneMatch: string | undefined,
  ifModifiedSince: string | undefined,
  etag: string | undefined,
  lastModified: string | undefined,
): boolean {
  if (ifNoneMatch !== undefined) return etagMatches(ifNoneMatch, etag);
  if (ifModifiedSince === undefined || lastModified === undefined) return false;
  const since = parseHttpDate(ifModifiedSince);
  const modified = parseHttpDate(lastModified);
  return since !== undefined && modified !== undefined && modified <= since;
}
