import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/platform/config/load.js';
import { apiPathname, createRouter, enterpriseForm, servesEnterpriseForms, upstreamPath } from '../../src/http/route.js';
import { checkFraming, checkHost, parseTarget } from '../../src/http/target.js';
import { createRouteMatcher } from '../../src/http/route.js';

const config = parseConfig({
  upstreams: [
    { name: 'github', prefix: '/', url: 'https://api.github.com' },
    { name: 'cyclists', prefix: '/bicyclists', url: 'http://127.0.0.1:9100' },
    { name: 'ghe', prefix: '/ghe/', url: 'https://ghe.example/api/v3', strip_prefix: true },
  ],
});
const router = createRouter(config.upstreams);

describe('router', () => {
  it.each([
    ['/repos/a/b', 'github'],
    ['/', 'github'],
    ['/bicyclists', 'cyclists'],
    ['/bicyclists/helsinki', 'cyclists'],
    ['/bicyclistsx', 'github'],
    ['/ghe', 'ghe'],
    ['/ghe/users/x', 'ghe'],
    ['/gheusers', 'github'],
  ])('%s -> %s (longest whole-segment prefix)', (path, name) => {
    expect(router.match(path)?.upstream.name).toBe(name);
  });

  it('returns undefined when no prefix matches', () => {
    const onlyA = createRouter(parseConfig({ upstreams: [{ name: 'a', prefix: '/a', url: 'http://h' }] }).upstreams);
    expect(onlyA.match('/b')).toBeUndefined();
  });

  it('builds upstream paths with the base path and optional prefix stripping', () => {
    const [gh, cy, ghe] = config.upstreams;
    expect(upstreamPath(gh!, '/', '/repos/a/b', '?page=2')).toBe('/repos/a/b?page=2');
    expect(upstreamPath(cy!, '/', '/bicyclists/spb', '')).toBe('/bicyclists/spb');
    expect(upstreamPath(ghe!, '/api/v3', '/ghe/users/x', '')).toBe('/api/v3/users/x');
    expect(upstreamPath(ghe!, '/api/v3', '/ghe', '?a=1')).toBe('/api/v3/?a=1');
  });

  it('gives route templates the path as the API sees it: below a stripped prefix, else as the client sent it', () => {
    const [gh, cy, ghe] = config.upstreams;
    expect(apiPathname(ghe!, '/ghe/repos/a/b')).toBe('/repos/a/b');
    expect(apiPathname(ghe!, '/ghe')).toBe('/');
    expect(apiPathname(gh!, '/repos/a/b')).toBe('/repos/a/b');
    // a prefix that is not stripped goes upstream, so it is part of the API's path
    expect(apiPathname(cy!, '/bicyclists/spb')).toBe('/bicyclists/spb');
  });
});

describe('request target', () => {
  it.each([
    ['/repos/a/b', '/repos/a/b', ''],
    ['/repos/a/b?page=2&per_page=5', '/repos/a/b', '?page=2&per_page=5'],
    ['/users/some.name', '/users/some.name', ''],
    ['/repos/a/b.js', '/repos/a/b.js', ''],
    ['/search?q=%2e%2e', '/search', '?q=%2e%2e'],
    ['/repos/a..;b/x;y', '/repos/a..;b/x;y', ''],
  ])('accepts %s', (url, pathname, search) => {
    expect(parseTarget(url)).toEqual({ ok: true, pathname, search });
  });

  it.each([
    [undefined],
    [''],
    ['http://evil.example/repos/a/b'],
    ['*'],
    ['//evil.example/x'],
    ['/repos/../admin'],
    ['/repos/%2e%2e/admin'],
    ['/repos/%2E%2e/admin'],
    ['/repos/a%2Fb'],
    ['/repos/a%5cb'],
    ['/repos/a\\b'],
    ['/repos/a%00'],
    ['/repos/%zz'],
    ['/repos/a#frag'],
    ['/' + 'a'.repeat(9000)],
    ['/..'],
    ['/.'],
    ['/repos/..;/admin'],
    ['/repos/..;x=1/admin'],
    ['/repos/.;/admin'],
    ['/repos/%2e%2e%3b/admin'],
  ])('rejects %s', (url) => {
    expect(parseTarget(url).ok).toBe(false);
  });

  it('needs exactly one Host on HTTP/1.1, at most one on HTTP/1.0', () => {
    expect(checkHost(['Host', 'a', 'Accept', '*/*'], true)).toBeUndefined();
    expect(checkHost(['Accept', '*/*'], false)).toBeUndefined();
    expect(checkHost(['Accept', '*/*'], true)?.ok).toBe(false);
    expect(checkHost(['Host', 'a', 'HOST', 'evil.example'], true)?.ok).toBe(false);
    expect(checkHost(['host', 'a', 'host', 'a'], false)?.ok).toBe(false);
  });

  it('refuses a Host whose value is not host[:port]', () => {
    for (const good of ['api.github.com', '127.0.0.1:8080', '[::1]:8080', 'xn--bcher-kva.example', '', 'a:']) {
      expect(checkHost(['Host', good], true), good).toBeUndefined();
    }
    for (const bad of ['evil.example/path', 'a b', 'a:80:80', 'a:123456', 'user@host', 'a\\b', '[::1', 'host#frag']) {
      expect(checkHost(['Host', bad], true)?.ok, bad).toBe(false);
    }
  });

  it('refuses a Transfer-Encoding that does not end in chunked, and closes', () => {
    for (const te of [undefined, 'chunked', 'Chunked', 'gzip, chunked', 'chunked, chunked']) expect(checkFraming(te)).toBeUndefined();
    for (const te of ['xchunked', 'gzip', 'chunked, gzip', 'identity', ''])
      expect(checkFraming(te)).toMatchObject({ ok: false, close: true });
  });
});

describe('GitHub Enterprise Server forms of a path', () => {
  it.each([
    ['/api/v3/repos/o/r', '/repos/o/r'],
    ['/api/v3/', '/'],
    ['/api/v3', '/'],
    ['/api/v3/rate_limit', '/rate_limit'],
    ['/api/graphql', '/graphql'],
  ])('%s is %s', (path, stripped) => expect(enterpriseForm(path)).toBe(stripped));

  it.each(['/repos/o/r', '/api/v30/repos', '/api/v3x', '/api/graphqlx', '/api/graphql/x', '/api', '/api/v3//evil.example/x', '/API/v3/x'])(
    'hostile or unrelated: %s is not one',
    (path) => expect(enterpriseForm(path)).toBeUndefined(),
  );

  it('a GitHub upstream on the root route serves them; others do not', () => {
    const [github, cyclists, ghe] = config.upstreams;
    expect(servesEnterpriseForms(github!)).toBe(true);
    expect(servesEnterpriseForms(cyclists!)).toBe(false);
    expect(servesEnterpriseForms(ghe!)).toBe(false);
    const pooled = parseConfig({ upstreams: [{ name: 'ghes', prefix: '/', url: 'https://ghe.example/api/v3', token_pool: true }] });
    expect(servesEnterpriseForms(pooled.upstreams[0]!)).toBe(true);
    const other = parseConfig({ upstreams: [{ name: 'other', prefix: '/', url: 'https://api.example.com' }] });
    expect(servesEnterpriseForms(other.upstreams[0]!)).toBe(false);
  });
});

describe("route labels of an upstream's own templates", () => {
  it("use GitHub's {param} spelling, whether the config writes :param or {param}", () => {
    const matcher = createRouteMatcher(['/bicyclists/:city', '/things/{id}/parts/:part', '/odd/a:b']);
    expect(matcher.match('/bicyclists/oslo')).toBe('/bicyclists/{city}');
    expect(matcher.match('/things/7/parts/9')).toBe('/things/{id}/parts/{part}');
    expect(matcher.match('/odd/a:b')).toBe('/odd/a:b'); // a colon inside a segment is a literal
    expect(matcher.match('/odd/ab')).not.toBe('/odd/a:b');
  });
});
