import { describe, expect, it } from 'vitest';
import { tokenFromAuthorization } from '../../fake-github/auth.js';
import { bumpTime } from '../../fake-github/data.js';
import { computeEtag, ifNoneMatchMatches, isNotModified, notModifiedSince } from '../../fake-github/etag.js';
import { DEMO_TOKENS, fakeUpstreamFlags, parseTokenSpec } from '../../fake-github/index.js';
import { linkHeader, pageRequest, withPage } from '../../fake-github/pagination.js';

describe('parseTokenSpec', () => {
  it('parses TOKEN:SCOPES entries with generated logins', () => {
    expect(parseTokenSpec('tok1:repo,tok2:')).toEqual([
      { token: 'tok1', login: 'fake-user-1', scopes: ['repo'] },
      { token: 'tok2', login: 'fake-user-2', scopes: [] },
    ]);
  });

  it('splits on the first colon only (scopes contain colons) and accepts TOKEN@login', () => {
    expect(parseTokenSpec('tok1@alice:repo+read:org, tok3@Zed:read:user')).toEqual([
      { token: 'tok1', login: 'alice', scopes: ['repo', 'read:org'] },
      { token: 'tok3', login: 'Zed', scopes: ['read:user'] },
    ]);
  });

  it.each([
    ['', 'no token'],
    ['nocolon', 'has no ":"'],
    [':repo', 'token must be'],
    ['tok@:repo', 'invalid login'],
    ['tok@bad login:repo', 'invalid login'],
    ['tok:repo,,tok2:', 'empty entry'],
    ['tok:repo,tok:', 'duplicate token'],
    ['tok:re po', 'invalid scope'],
    ['tok:repo++x', 'invalid scope'],
  ])('rejects %j', (spec, message) => {
    expect(() => parseTokenSpec(spec)).toThrow(message);
  });

  it('never echoes a whole token in an error', () => {
    expect(() => parseTokenSpec('secret_value_123')).toThrow(/^(?!.*secret_value_123)/);
  });

  it('the demo set has a repo-scoped alice and a bob without repo, all obviously fake', () => {
    expect(DEMO_TOKENS.find((t) => t.login === 'alice' && t.scopes.includes('repo'))).toBeDefined();
    expect(DEMO_TOKENS.find((t) => t.login === 'bob' && !t.scopes.includes('repo'))).toBeDefined();
    for (const demoToken of DEMO_TOKENS) expect(demoToken.token).toMatch(/^demo_token_/);
  });

  it('describes every CLI flag', () => {
    expect(fakeUpstreamFlags.map((f) => f.flag)).toEqual([
      '--port',
      '--host',
      '--tokens',
      '--anon-limit',
      '--token-limit',
      '--window-seconds',
      '--latency-ms',
      '--faults',
      '--app',
      '--installation-token-seconds',
      '--base-path',
      '--no-rate-limits',
      '--webhook-url',
      '--webhook-secret',
    ]);
  });
});

describe('Authorization parsing', () => {
  it.each([
    ['token abc', 'abc'],
    ['Token abc', 'abc'],
    ['bearer abc', 'abc'],
    ['Bearer   abc  ', 'abc'],
    [`Basic ${Buffer.from('user:abc').toString('base64')}`, 'abc'],
    [`Basic ${Buffer.from('user:a:b').toString('base64')}`, 'a:b'],
    ['token', null],
    ['token a b', null],
    ['Basic ***', null],
    [`Basic ${Buffer.from('nocolon').toString('base64')}`, null],
    ['Negotiate abc', null],
  ])('%j → %j', (header, token) => {
    expect(tokenFromAuthorization(header)).toBe(token);
  });
});

describe('validators', () => {
  const etag = computeEtag('abc', 'application/json', '', '2022-11-28');

  it('computes weak, deterministic ETags that depend on every input', () => {
    expect(etag).toMatch(/^W\/"[0-9a-f]{64}"$/);
    expect(computeEtag('abc', 'application/json', '', '2022-11-28')).toBe(etag);
    const variants = [
      computeEtag('abd', 'application/json', '', '2022-11-28'),
      computeEtag('abc', '*/*', '', '2022-11-28'),
      computeEtag('abc', 'application/json', 'token x', '2022-11-28'),
      computeEtag('abc', 'application/json', '', '2026-03-10'),
    ];
    expect(new Set([etag, ...variants]).size).toBe(5);
  });

  it('compares If-None-Match weakly, with lists and *', () => {
    expect(ifNoneMatchMatches(etag, etag)).toBe(true);
    expect(ifNoneMatchMatches(etag.slice(2), etag)).toBe(true);
    expect(ifNoneMatchMatches(`"x", ${etag}`, etag)).toBe(true);
    expect(ifNoneMatchMatches('*', etag)).toBe(true);
    expect(ifNoneMatchMatches('W/"x"', etag)).toBe(false);
    expect(ifNoneMatchMatches('', etag)).toBe(false);
  });

  it('If-Modified-Since: not older than Last-Modified means not modified; If-None-Match wins', () => {
    const lm = Date.parse('2024-06-20T10:00:00Z');
    expect(notModifiedSince('Thu, 20 Jun 2024 10:00:00 GMT', lm)).toBe(true);
    expect(notModifiedSince('Thu, 20 Jun 2024 09:59:59 GMT', lm)).toBe(false);
    expect(notModifiedSince('garbage', lm)).toBe(false);
    expect(isNotModified('W/"x"', 'Thu, 20 Jun 2024 10:00:00 GMT', etag, lm)).toBe(false);
    expect(isNotModified(undefined, 'Thu, 20 Jun 2024 10:00:00 GMT', etag, lm)).toBe(true);
    expect(isNotModified(undefined, undefined, etag, lm)).toBe(false);
  });

  it('mutation times move forward by at least a second', () => {
    const prev = Date.parse('2030-01-01T00:00:00Z');
    expect(bumpTime(prev, prev - 5000)).toBe(prev + 1000);
    expect(bumpTime(0, 1_700_000_000_123)).toBe(1_700_000_000_000);
  });
});

describe('pagination helpers', () => {
  it('reads per_page (default 30, max 100) and page (default 1)', () => {
    expect(pageRequest(new URLSearchParams(''))).toEqual({ page: 1, perPage: 30 });
    expect(pageRequest(new URLSearchParams('per_page=100&page=4'))).toEqual({ page: 4, perPage: 100 });
    expect(pageRequest(new URLSearchParams('per_page=101'))).toEqual({ page: 1, perPage: 100 });
    expect(pageRequest(new URLSearchParams('per_page=0&page=0'))).toEqual({ page: 1, perPage: 30 });
    expect(pageRequest(new URLSearchParams('per_page=1e3&page=x'))).toEqual({ page: 1, perPage: 30 });
  });

  it('replaces or appends page, keeping other parameters in order', () => {
    expect(withPage('', 2)).toBe('page=2');
    expect(withPage('a=1&page=5&b=%20', 2)).toBe('a=1&page=2&b=%20');
    expect(withPage('page=1&page=3&x', 4)).toBe('page=4&x');
  });

  it('builds GitHub-ordered Link headers', () => {
    expect(linkHeader('http://h', '/p', '', 1, 1)).toBeNull();
    expect(linkHeader('http://h', '/p', '', 1, 2)).toBe('<http://h/p?page=2>; rel="next", <http://h/p?page=2>; rel="last"');
    expect(linkHeader('http://h', '/p', 'page=2', 2, 2)).toBe('<http://h/p?page=1>; rel="prev", <http://h/p?page=1>; rel="first"');
  });
});
