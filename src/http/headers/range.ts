/**
 * Pure byte ranges (RFC 9110 section 14): which part of a complete representation a `Range`
 * request asks for, and whether `If-Range` lets it. One range is served as a 206; a request for
 * several, or a `Range` that does not parse, is answered with the whole representation (a server
 * may ignore Range, section 14.2); a range that starts past the end is a 416.
 */

export type ByteRange =
  | { kind: 'whole' }
  | { kind: 'part'; start: number; end: number }
  /** Nothing of the representation is in the range: 416 with `Content-Range: bytes * /length`. */
  | { kind: 'unsatisfiable' };

const WHOLE: ByteRange = { kind: 'whole' };
const SPEC = /^(\d*)-(\d*)$/;

/** The range a `Range` field asks of a representation of `length` bytes. */
export function byteRange(range: string | undefined, length: number): ByteRange {
  if (range === undefined) return WHOLE;
  const eq = range.indexOf('=');
  if (eq === -1 || range.slice(0, eq).trim().toLowerCase() !== 'bytes') return WHOLE;
  const specs = range
    .slice(eq + 1)
    .split(',')
    .map((spec) => spec.trim())
    .filter((spec) => spec.length > 0);
  if (specs.length !== 1) return WHOLE;
  const match = SPEC.exec(specs[0]!);
  if (match === null) return WHOLE;
  const [, first = '', last = ''] = match;
  if (first === '') {
    if (last === '') return WHOLE;
    const suffix = Number(last);
    if (suffix === 0 || length === 0) return { kind: 'unsatisfiable' };
    return { kind: 'part', start: Math.max(0, length - suffix), end: length - 1 };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return WHOLE; // an invalid range-spec: the field is ignored
  if (start >= length) return { kind: 'unsatisfiable' };
  return { kind: 'part', start, end: last === '' ? length - 1 : Math.min(Number(last), length - 1) };
}

/**
 * Whether `If-Range` lets a range be served from a stored response (section 13.1.5): absent, or an
 * entity-tag equal to the stored strong `ETag`, or exactly the stored `Last-Modified`.
 */
export function ifRangeHolds(ifRange: string | undefined, etag: string | undefined, lastModified: string | undefined): boolean {
  if (ifRange === undefined) return true;
  const value = ifRange.trim();
  if (value.startsWith('"') || value.startsWith('W/')) return etag !== undefined && !etag.startsWith('W/') && value === etag.trim();
  return lastModified !== undefined && value === lastModified.trim();
}
