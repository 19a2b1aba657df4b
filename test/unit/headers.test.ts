import { describe, expect, it } from 'vitest';
import { cacheStatus, clientHasCurrent, etagMatches } from '../../src/http/headers/fields.js';
import { publicBase, rewriteLink } from '../../src/http/representation.js';

describe('conditional requests', () => {
  it('matches ETags weakly, in lists and with *', () => {
    expect(etagMatches('W/"a"', 'W/"a"')).toBe(true);
    expect(etagMatches('"a"', 'W/"a"')).toBe(true);
    expect(etagMatches('W/"b", W/"a"', 'W/"a"')).toBe(true);
    expect(etagMatches('*', 'W/"a"')).toBe(true);
    expect(etagMatches('W/"b"', 'W/"a"')).toBe(false);
    expect(etagMatches('W/"a"', undefined)).toBe(false);
  });
  it('uses If-Modified-Since only without If-None-Match', () => {
    const lm = 'Mon, 01 Jan 2024 00:00:00 GMT';
    expect(clientHasCurrent(undefined, lm, undefined, lm)).toBe(true);
    expect(clientHasCurrent(undefined, 'Sun, 31 Dec 2023 00:00:00 GMT', undefined, lm)).toBe(false);
    expect(clientHasCurrent('W/"x"', lm, 'W/"y"', lm)).toBe(false);
    expect(clientHasCurrent(undefined, 'garbage', undefined, lm)).toBe(false);
    expect(clientHasCurrent(undefined, undefined, 'W/"y"', lm)).toBe(false);
  });
});

describe('Cache-Status (RFC 9211)', () => {
  it.each([
    [{ hit: true, ttl: 42.7 }, 'etagere; hit; ttl=42'],
    [{ fwd: 'miss' as const, fwdStatus: 200, stored: true }, 'etagere; fwd=miss; fwd-status=200; stored'],
    [{ fwd: 'stale' as const, fwdStatus: 304 }, 'etagere; fwd=stale; fwd-status=304'],
    [{ fwd: 'stale' as const, fwdStatus: 502, detail: 'stale-if-error' }, 'etagere; fwd=stale; fwd-status=502; detail=stale-if-error'],
    [{ fwd: 'miss' as const, fwdStatus: 200, stored: true, collapsed: true }, 'etagere; fwd=miss; fwd-status=200; stored; collapsed'],
    [{ fwd: 'bypass' as const }, 'etagere; fwd=bypass'],
  ])('%j -> %s', (input, out) => {
    expect(cacheStatus(input)).toBe(out);
  });
});

describe('Link rewriting', () => {
  const rewrite = { upstreamBase: 'https://api.github.com', proxyBase: 'http://proxy.local:8080' };
  it('rewrites upstream URLs and keeps everything else', () => {
    const link =
      '<https://api.github.com/orgs/o/repos?page=2>; rel="next", <https://api.github.com/orgs/o/repos?page=5>; rel="last", <https://elsewhere.example/x>; rel="help"';
    expect(rewriteLink(link, rewrite)).toBe(
      '<http://proxy.local:8080/orgs/o/repos?page=2>; rel="next", <http://proxy.local:8080/orgs/o/repos?page=5>; rel="last", <https://elsewhere.example/x>; rel="help"',
    );
  });
  it('does not rewrite look-alike hosts', () => {
    const link = '<https://api.github.com.evil.example/x>; rel="next"';
    expect(rewriteLink(link, rewrite)).toBe(link);
  });
  it('takes the public base from config, from trusted forwarded headers, else from the request’s own Host', () => {
    const header = (m: Record<string, string>) => (n: string) => m[n];
    expect(publicBase('https://p.example/', false, header({ host: 'evil' }))).toBe('https://p.example');
    // Zero configuration: the client's own Host, never its X-Forwarded-* without trust_forwarded.
    expect(
      publicBase(null, false, header({ host: 'proxy.example:8080', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' })),
    ).toBe('http://proxy.example:8080');
    expect(publicBase(null, true, header({ host: 'proxy:8080' }))).toBe('http://proxy:8080');
    expect(publicBase(null, true, header({ 'x-forwarded-host': 'p.example', 'x-forwarded-proto': 'https', host: 'x' }))).toBe(
      'https://p.example',
    );
    expect(publicBase(null, true, header({ host: 'evil.example/path?<>' }))).toBeUndefined();
  });
});
