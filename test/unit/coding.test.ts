import { describe, expect, it } from 'vitest';
import { acceptsCoding, acceptsGzip, contentCodingOf } from '../../src/headers/coding.js';
import { entryCoding } from '../../src/proxy/entry-coding.js';

describe('Accept-Encoding (RFC 9110 section 12.5.3)', () => {
  it('takes a coding named, or `*`, with a q-value above 0', () => {
    expect(acceptsGzip('gzip, deflate, br')).toBe(true);
    expect(acceptsGzip('GZip;Q=0.5')).toBe(true);
    expect(acceptsGzip('*')).toBe(true);
    expect(acceptsGzip(['br', 'gzip'])).toBe(true);
    expect(acceptsCoding('br;q=1, gzip;q=0.1', 'br')).toBe(true);
  });
  it('refuses what q=0 refuses, a missing header and nonsense', () => {
    expect(acceptsGzip(undefined)).toBe(false);
    expect(acceptsGzip('')).toBe(false);
    expect(acceptsGzip('identity')).toBe(false);
    expect(acceptsGzip('gzip;q=0')).toBe(false);
    expect(acceptsGzip('*, gzip;q=0')).toBe(false);
    expect(acceptsGzip('*;q=0')).toBe(false);
    expect(acceptsGzip('gzip;q=lots')).toBe(false);
    expect(acceptsGzip('x-gzipped')).toBe(false);
    expect(acceptsGzip(';;;,,,==')).toBe(false);
    // The one-value memo answers each value on its own.
    expect(acceptsGzip('gzip')).toBe(true);
    expect(acceptsGzip('gzip;q=0')).toBe(false);
  });
});

describe('Content-Encoding of a stored entry', () => {
  it('reads identity as no coding', () => {
    expect(contentCodingOf(undefined)).toBeUndefined();
    expect(contentCodingOf(' Identity ')).toBeUndefined();
    expect(contentCodingOf('GZIP')).toBe('gzip');
  });
  it('decodes gzip unless no-transform forbids it, and knows whether Vary lists Accept-Encoding', () => {
    expect(entryCoding([['content-encoding', 'gzip']])).toEqual({ gzip: true, variesOnCoding: false });
    expect(
      entryCoding([
        ['content-encoding', 'gzip'],
        ['cache-control', 'private, No-Transform'],
      ]).gzip,
    ).toBe(false);
    expect(entryCoding([['content-encoding', 'br']]).gzip).toBe(false);
    expect(entryCoding([['vary', 'Accept, Accept-Encoding']]).variesOnCoding).toBe(true);
    expect(entryCoding([['vary', 'X-Accept-Encoding-Not']]).variesOnCoding).toBe(false);
  });
});
