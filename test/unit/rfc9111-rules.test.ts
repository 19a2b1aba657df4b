/**
 * The pure rules of policy `rfc9111`: Age (RFC 9111 section 5.1), HTTP-dates
 * (RFC 9110 section 5.6.7), freshening with a 304 (RFC 9111 sections 4.3.4 and 3.2), the validators
 * of a revalidation (section 4.3.1), and invalidation after unsafe methods (section 4.4).
 */
import { describe, expect, it } from 'vitest';
import { freshens, KEPT_ON_304, selectedBy304 } from '../../src/cache/rules/freshen.js';
import { revalidationHeaders } from '../../src/cache/rules/freshen.js';
import { invalidatedPaths, invalidates, type PathMapping } from '../../src/cache/rules/invalidation.js';
import { ageValue, mergeHeaders, UNTRUSTED_AGE } from '../../src/cache/rules/policy.js';
import { parseHttpDate } from '../../src/http/headers/fields.js';

describe('Age (RFC 9111 section 5.1, read conservatively)', () => {
  it.each([
    ['3600', 3600],
    ['0', 0],
    [' 42 ', 42],
    ['99999999999999999999', 2_147_483_648],
  ] as const)('%j counts as %d', (header, expected) => {
    expect(ageValue(header)).toBe(expected);
  });
  it.each([
    '',
    ' ',
    'old',
    'old, 0',
    '0, 0',
    '3600, 3600',
    '0, 7200',
    ', 7',
    '-1',
    '-0',
    '1.5',
    '1e3',
    '0x10',
    '+5',
    '3600;p=1',
    '3600 s',
    'Infinity',
    'NaN',
  ])('%j cannot be trusted: the response is stale on arrival', (header) => {
    expect(ageValue(header)).toBe(UNTRUSTED_AGE);
  });
  it('two field lines are a list, whatever they say', () => {
    expect(ageValue(['0', '0'])).toBe(UNTRUSTED_AGE);
    expect(ageValue(['7200', '0'])).toBe(UNTRUSTED_AGE);
  });
  it('no Age is no Age', () => {
    expect(ageValue(undefined)).toBeUndefined();
  });
});

describe('HTTP-date (RFC 9110 section 5.6.7)', () => {
  const instant = Date.UTC(1994, 10, 6, 8, 49, 37);
  it('reads the three formats, case-insensitively, in UTC', () => {
    expect(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')).toBe(instant);
    expect(parseHttpDate('sun, 06 nov 1994 08:49:37 gmt')).toBe(instant);
    expect(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT', Date.UTC(2024, 0, 1))).toBe(instant);
    expect(parseHttpDate('Sun Nov  6 08:49:37 1994')).toBe(instant);
  });
  it('places a two-digit year no more than 50 years ahead', () => {
    expect(parseHttpDate('Tuesday, 01-Jan-80 00:00:00 GMT', Date.UTC(2024, 0, 1))).toBe(Date.UTC(1980, 0, 1));
    expect(parseHttpDate('Thursday, 01-Jan-60 00:00:00 GMT', Date.UTC(2024, 0, 1))).toBe(Date.UTC(2060, 0, 1));
    expect(parseHttpDate('Monday, 01-Jan-46 00:00:00 GMT', Date.UTC(2024, 0, 1))).toBe(Date.UTC(2046, 0, 1));
  });
  it.each([
    '0',
    '99999',
    'never',
    '2094-01-01',
    '2094-01-01T00:00:00Z',
    'Sun, 06 Nov 1994 08:49:37 PST',
    'Sun, 06 Nov 1994 08:49:37',
    'Sun, 31 Feb 1994 08:49:37 GMT',
    'Sun, 06 Nov 1994 24:00:00 GMT',
    'Sun, 6 Nov 1994 08:49:37 GMT',
    '',
  ])('%j is not an HTTP-date', (value) => {
    expect(parseHttpDate(value)).toBeUndefined();
  });
});

describe('freshening with a 304 (RFC 9111 section 4.3.4)', () => {
  const LM = 'Mon, 01 Jan 2024 00:00:00 GMT';
  const stored = (etag: string | undefined, lastModified: string | undefined = undefined) => ({ etag, lastModified });
  it('a strong ETag selects only the stored response with the same strong ETag', () => {
    expect(selectedBy304(stored('"a"'), stored('"a"'))).toBe(true);
    expect(selectedBy304(stored('"a"', LM), stored('"a"', 'Tue, 02 Jan 2024 00:00:00 GMT'))).toBe(true);
    expect(selectedBy304(stored('"a"'), stored('"b"'))).toBe(false);
    expect(selectedBy304(stored('W/"a"'), stored('"a"'))).toBe(false);
    expect(selectedBy304(stored(undefined, LM), stored('"a"', LM))).toBe(false);
  });
  it('weak validators must correspond: the same opaque tag, the same Last-Modified instant, none differing', () => {
    expect(selectedBy304(stored('W/"a"'), stored('W/"a"'))).toBe(true);
    expect(selectedBy304(stored('"a"'), stored('W/"a"'))).toBe(true);
    expect(selectedBy304(stored('W/"a"'), stored('W/"b"'))).toBe(false);
    expect(selectedBy304(stored(undefined, LM), stored(undefined, LM))).toBe(true);
    expect(selectedBy304(stored(undefined, LM), stored(undefined, 'Monday, 01-Jan-24 00:00:00 GMT'))).toBe(true);
    expect(selectedBy304(stored(undefined, LM), stored(undefined, 'Tue, 02 Jan 2024 00:00:00 GMT'))).toBe(false);
    expect(selectedBy304(stored('W/"a"', LM), stored('W/"a"', 'Tue, 02 Jan 2024 00:00:00 GMT'))).toBe(false);
    expect(selectedBy304(stored('"a"'), stored(undefined, LM))).toBe(false);
  });
  it('a 304 without validators selects only a stored response without validators', () => {
    expect(selectedBy304(stored(undefined), stored(undefined))).toBe(true);
    expect(selectedBy304(stored('"a"'), stored(undefined))).toBe(false);
    expect(selectedBy304(stored(undefined, LM), stored(undefined))).toBe(false);
  });
  it('the GitHub policies keep their rule: a 304 confirms the entry it answered', () => {
    for (const kind of ['max-age', 'revalidate', 'ttl'] as const) expect(freshens(kind, stored('W/"a"'), stored(undefined))).toBe(true);
    expect(freshens('rfc9111', stored('W/"a"'), stored(undefined))).toBe(false);
  });
  it('updates every stored field but those section 3.2 excepts, Content-Type included (rfc9111)', () => {
    const before: Array<[string, string]> = [
      ['content-type', 'application/json'],
      ['content-encoding', 'identity'],
      ['content-md5', 'Q2hlY2sgSW50ZWdyaXR5IQ=='],
      ['etag', '"a"'],
      ['cache-control', 'max-age=60'],
      ['x-extra', 'old'],
    ];
    const notModified: Array<[string, string]> = [
      ['content-type', 'application/vnd.example+json'],
      ['content-length', '0'],
      ['content-encoding', 'gzip'],
      ['content-md5', 'AAAAAAAAAAAAAAAAAAAAAA=='],
      ['content-digest', 'sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:'],
      ['cache-control', 'max-age=120'],
      ['x-extra', 'new'],
      ['x-added', '1'],
    ];
    expect(Object.fromEntries(mergeHeaders(before, notModified, KEPT_ON_304))).toEqual({
      'content-type': 'application/vnd.example+json',
      'content-encoding': 'identity',
      'content-md5': 'Q2hlY2sgSW50ZWdyaXR5IQ==',
      etag: '"a"',
      'cache-control': 'max-age=120',
      'x-extra': 'new',
      'x-added': '1',
    });
  });
});

describe('the validators of a revalidation (RFC 9111 section 4.3.1)', () => {
  const both = { etag: '"a"', lastModified: 'Mon, 01 Jan 2024 00:00:00 GMT' };
  it('rfc9111 sends the ETag and Last-Modified', () => {
    expect(revalidationHeaders(both, 'rfc9111')).toEqual({ 'if-none-match': '"a"', 'if-modified-since': both.lastModified });
    expect(revalidationHeaders({ etag: undefined, lastModified: both.lastModified }, 'rfc9111')).toEqual({
      'if-modified-since': both.lastModified,
    });
  });
  it('the GitHub policies send the ETag, else Last-Modified', () => {
    expect(revalidationHeaders(both, 'max-age')).toEqual({ 'if-none-match': '"a"' });
    expect(revalidationHeaders({ etag: undefined, lastModified: both.lastModified }, 'revalidate')).toEqual({
      'if-modified-since': both.lastModified,
    });
  });
});

describe('invalidation after unsafe methods (RFC 9111 section 4.4)', () => {
  it('a 2xx or 3xx to any method but GET, HEAD, OPTIONS and TRACE invalidates', () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'M-SEARCH', 'PURGE', 'LINK', 'get'])
      for (const status of [200, 201, 204, 301, 303, 399]) expect(invalidates(method, status)).toBe(true);
    for (const method of ['GET', 'HEAD', 'OPTIONS', 'TRACE']) expect(invalidates(method, 200)).toBe(false);
    for (const status of [100, 101, 400, 404, 409, 500, 503]) expect(invalidates('POST', status)).toBe(false);
  });

  const mapping: PathMapping = {
    upstreamOrigin: 'https://api.example.com',
    basePrefix: '',
    strippedPrefix: '',
    publicBase: 'http://proxy.local:8080',
  };
  const paths = (location: string | undefined, contentLocation: string | undefined = undefined, map: PathMapping = mapping) =>
    invalidatedPaths({ pathname: '/items', upstreamPath: '/items?x=1', location, contentLocation }, map);

  it('invalidates the target, and Location and Content-Location on the same origin', () => {
    expect(paths(undefined)).toEqual(['/items']);
    expect(paths('https://api.example.com/items/7', 'https://api.example.com/items/7/view')).toEqual([
      '/items',
      '/items/7',
      '/items/7/view',
    ]);
    expect(paths('/items/8', 'items/9')).toEqual(['/items', '/items/8', '/items/9']);
    expect(paths('http://proxy.local:8080/items/10')).toEqual(['/items', '/items/10']);
    expect(paths('https://API.example.com:443/items/11')).toEqual(['/items', '/items/11']);
  });
  it('never invalidates another origin, a look-alike, another port or scheme, or garbage', () => {
    for (const location of [
      'https://other.example.com/items/1',
      'https://api.example.com.evil.example/items/1',
      'http://api.example.com/items/1',
      'https://api.example.com:8443/items/1',
      'http://proxy.local:9999/items/1',
      'http://[::1/items',
      '   ',
    ])
      expect(paths(location)).toEqual(['/items']);
  });
  it('maps the upstream base path and a stripped route prefix back to the client path', () => {
    const ghes: PathMapping = { ...mapping, upstreamOrigin: 'https://ghe.example.com', basePrefix: '/api/v3', strippedPrefix: '/ghe' };
    const input = (location: string) =>
      invalidatedPaths({ pathname: '/ghe/repos/a/b', upstreamPath: '/api/v3/repos/a/b', location, contentLocation: undefined }, ghes);
    expect(input('https://ghe.example.com/api/v3/repos/a/c')).toEqual(['/ghe/repos/a/b', '/ghe/repos/a/c']);
    expect(input('/api/v3')).toEqual(['/ghe/repos/a/b', '/ghe', '/ghe/']);
    // Outside the upstream's base path: nothing of this route.
    expect(input('https://ghe.example.com/login')).toEqual(['/ghe/repos/a/b']);
    expect(input('http://proxy.local:8080/ghe/repos/a/d')).toEqual(['/ghe/repos/a/b', '/ghe/repos/a/d']);
  });
  it('without a known public base, only the upstream origin counts', () => {
    expect(paths('http://proxy.local:8080/items/10', undefined, { ...mapping, publicBase: undefined })).toEqual(['/items']);
  });
});
