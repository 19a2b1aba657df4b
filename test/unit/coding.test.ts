import { describe, expect, it } from 'vitest';
import { acceptsCoding, acceptsGzip, contentCodingOf, refusesCoding } from '../../src/http/representation.js';
import { entryCoding, fixedCoding } from '../../src/cache/store/entry-codec.js';

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

describe('an explicit refusal of a coding (entries the proxy may not decode)', () => {
  it('counts only an Accept-Encoding that was sent: none takes any coding', () => {
    expect(refusesCoding(undefined, 'gzip')).toBe(false);
    expect(refusesCoding('gzip, deflate, br', 'gzip')).toBe(false);
    expect(refusesCoding('*', 'br')).toBe(false);
    expect(refusesCoding('gzip', 'x-gzip')).toBe(false); // x-gzip is gzip (RFC 9110 section 8.4.1.3)
    expect(refusesCoding('gzip, br', 'gzip, br')).toBe(false);
  });
  it('refuses identity only, q=0, the wildcard at 0, another coding, an empty value and garbage', () => {
    for (const header of [
      'identity',
      'gzip;q=0',
      'gzip;q=0, identity;q=0',
      '*;q=0',
      'br',
      '',
      ';;;,,,==',
      'gzip;q=lots',
      '\u0000gzip\u0000',
    ]) {
      expect(refusesCoding(header, 'gzip'), header).toBe(true);
    }
    expect(refusesCoding('br', 'gzip, br')).toBe(true); // every coding of a list must be taken
    expect(refusesCoding(`${'x;q=1, '.repeat(2000)}gzip;q=0`, 'gzip')).toBe(true);
  });
});

describe('Content-Encoding of a stored entry', () => {
  it('reads identity as no coding', () => {
    expect(contentCodingOf(undefined)).toBeUndefined();
    expect(contentCodingOf(' Identity ')).toBeUndefined();
    expect(contentCodingOf('GZIP')).toBe('gzip');
  });
  it('decodes gzip unless no-transform forbids it, and knows whether Vary lists Accept-Encoding', () => {
    expect(entryCoding([['content-encoding', 'gzip']])).toEqual({
      gzip: true,
      fixed: undefined,
      variesOnCoding: false,
      noTransform: false,
    });
    expect(
      entryCoding([
        ['content-encoding', 'gzip'],
        ['cache-control', 'private, No-Transform'],
      ]).gzip,
    ).toBe(false);
    expect(entryCoding([['content-encoding', 'br']]).gzip).toBe(false);
  });
  it('names the coding the proxy may not (no-transform) or cannot (not gzip) decode, and no other', () => {
    expect(entryCoding([['content-encoding', 'gzip']]).fixed).toBeUndefined();
    expect(entryCoding([['cache-control', 'no-transform']]).fixed).toBeUndefined();
    expect(
      entryCoding([
        ['content-encoding', 'GZIP'],
        ['cache-control', 'max-age=60, no-transform'],
      ]).fixed,
    ).toBe('gzip');
    expect(entryCoding([['content-encoding', 'br']]).fixed).toBe('br');
    expect(fixedCoding('gzip', 'public, no-transform')).toBe('gzip');
    expect(fixedCoding('gzip', 'public')).toBeUndefined();
    expect(fixedCoding(undefined, 'no-transform')).toBeUndefined();
    expect(fixedCoding('identity', 'no-transform')).toBeUndefined();
    expect(entryCoding([['vary', 'Accept, Accept-Encoding']]).variesOnCoding).toBe(true);
    expect(entryCoding([['vary', 'X-Accept-Encoding-Not']]).variesOnCoding).toBe(false);
  });
});
