/**
 * Byte ranges (RFC 9110 section 14) cut from a stored complete response under `rfc9111`: the part
 * a Range field asks for, the whole representation for what the cache may ignore, 416 past the end.
 */
import { describe, expect, it } from 'vitest';
import { byteRange, ifRangeHolds } from '../../src/http/headers/range.js';

describe('byte ranges of a stored representation', () => {
  it('reads first-last, first- and -suffix ranges', () => {
    expect(byteRange('bytes=0-1', 11)).toEqual({ kind: 'part', start: 0, end: 1 });
    expect(byteRange('bytes=1-', 11)).toEqual({ kind: 'part', start: 1, end: 10 });
    expect(byteRange('bytes=-1', 11)).toEqual({ kind: 'part', start: 10, end: 10 });
    expect(byteRange('Bytes = 2-4 ', 11)).toEqual({ kind: 'part', start: 2, end: 4 });
  });
  it('clips a range that runs past the end, and a suffix longer than the representation', () => {
    expect(byteRange('bytes=5-999', 11)).toEqual({ kind: 'part', start: 5, end: 10 });
    expect(byteRange('bytes=-999', 11)).toEqual({ kind: 'part', start: 0, end: 10 });
  });
  it('a range that starts past the end, or an empty suffix, cannot be satisfied (416)', () => {
    expect(byteRange('bytes=11-', 11)).toEqual({ kind: 'unsatisfiable' });
    expect(byteRange('bytes=20-30', 11)).toEqual({ kind: 'unsatisfiable' });
    expect(byteRange('bytes=-0', 11)).toEqual({ kind: 'unsatisfiable' });
    expect(byteRange('bytes=0-', 0)).toEqual({ kind: 'unsatisfiable' });
  });
  it('serves the whole representation for what it may ignore: other units, bad syntax, several ranges', () => {
    for (const range of [
      'items=0-1',
      'bytes',
      'bytes=',
      'bytes=-',
      'bytes=a-b',
      'bytes=1-0',
      'bytes=0x1-2',
      'bytes=0-1,3-4',
      'bytes=1.5-2',
      'bytes=-1-2',
    ]) {
      expect(byteRange(range, 11), range).toEqual({ kind: 'whole' });
    }
    expect(byteRange(undefined, 11)).toEqual({ kind: 'whole' });
  });
});

describe('If-Range', () => {
  it('holds for the stored strong ETag or the exact Last-Modified, or when absent', () => {
    expect(ifRangeHolds(undefined, undefined, undefined)).toBe(true);
    expect(ifRangeHolds('"v1"', '"v1"', undefined)).toBe(true);
    expect(ifRangeHolds('Mon, 01 Jan 2024 00:00:00 GMT', undefined, 'Mon, 01 Jan 2024 00:00:00 GMT')).toBe(true);
  });
  it('does not hold for another or a weak ETag, another date, or a validator the entry lacks', () => {
    expect(ifRangeHolds('"v2"', '"v1"', undefined)).toBe(false);
    expect(ifRangeHolds('W/"v1"', 'W/"v1"', undefined)).toBe(false);
    expect(ifRangeHolds('"v1"', 'W/"v1"', undefined)).toBe(false);
    expect(ifRangeHolds('"v1"', undefined, 'Mon, 01 Jan 2024 00:00:00 GMT')).toBe(false);
    expect(ifRangeHolds('Tue, 02 Jan 2024 00:00:00 GMT', '"v1"', 'Mon, 01 Jan 2024 00:00:00 GMT')).toBe(false);
  });
});
