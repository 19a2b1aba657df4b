/**
 * Link and Location rewriting with zero configuration: the request's own Host is the
 * public base unless public_url says otherwise; X-Forwarded-* only with trust_forwarded; only a
 * plain host[:port] is ever put into a URL; only URLs under the upstream base are rewritten.
 */
import { describe, expect, it } from 'vitest';
import { isPlainHost, publicBase, rewriteLink, rewriteLocation, rewritesLocation, withRoutePrefix } from '../../src/http/representation.js';

const header = (values: Record<string, string>) => (name: string) => values[name];
const rewrite = { upstreamBase: 'https://api.github.com', proxyBase: 'http://localhost:8080' };

describe('publicBase with zero configuration', () => {
  it('uses the request’s own Host over http', () => {
    expect(publicBase(null, false, header({ host: 'localhost:8080' }))).toBe('http://localhost:8080');
    expect(publicBase(null, false, header({ host: '[::1]:8080' }))).toBe('http://[::1]:8080');
    expect(publicBase(null, false, header({ host: ' proxy.internal ' }))).toBe('http://proxy.internal');
    // On a TLS listener (listen.tls) a base from Host is https; a forwarded proto still says which.
    expect(publicBase(null, false, header({ host: 'localhost:8443' }), 'https')).toBe('https://localhost:8443');
    expect(publicBase(null, true, header({ host: 'h', 'x-forwarded-proto': 'http' }), 'https')).toBe('http://h');
    expect(publicBase(null, true, header({ host: 'h', 'x-forwarded-proto': 'gopher' }), 'https')).toBe('https://h');
  });
  it('ignores X-Forwarded-Host and -Proto unless trust_forwarded', () => {
    const forwarded = header({ host: 'localhost:8080', 'x-forwarded-host': 'attacker.example', 'x-forwarded-proto': 'https' });
    expect(publicBase(null, false, forwarded)).toBe('http://localhost:8080');
    expect(publicBase(null, true, forwarded)).toBe('https://attacker.example');
  });
  it('hostile: a Host that is not a plain host[:port] is never reflected (no rewrite at all)', () => {
    for (const host of [
      '',
      'evil.example/path',
      'user@evil.example',
      'ev!l.example',
      "a'b.example",
      'a%2Fb.example',
      'evil.example:99999',
      'evil.example:',
      'evil.example:80:80',
      '<script>',
      'x'.repeat(300),
    ]) {
      expect(publicBase(null, false, header({ host })), JSON.stringify(host)).toBeUndefined();
      expect(publicBase(null, true, header({ host: 'ok.example', 'x-forwarded-host': host })), JSON.stringify(host)).toBeUndefined();
    }
    expect(publicBase(null, false, header({}))).toBeUndefined();
    expect(publicBase(null, false, header({ host: 'a,b.example' }))).toBeUndefined();
    // X-Forwarded-Host is a list (each proxy appends): its first entry is the client-facing one.
    expect(publicBase(null, true, header({ host: 'ok.example', 'x-forwarded-host': 'a.example, b.example' }))).toBe('http://a.example');
  });
  it('isPlainHost accepts names, IPv4, IPv6 literals and ports up to 65535 only', () => {
    expect(isPlainHost('a.b-c.example:65535')).toBe(true);
    expect(isPlainHost('10.0.0.1')).toBe(true);
    expect(isPlainHost('[fe80::1]')).toBe(true);
    expect(isPlainHost('a.example:65536')).toBe(false);
    expect(isPlainHost(undefined)).toBe(false);
  });
  it('adds the route prefix only when it is stripped', () => {
    expect(withRoutePrefix('http://p', true, '/gh')).toBe('http://p/gh');
    expect(withRoutePrefix('http://p', false, '/gh')).toBe('http://p');
    expect(withRoutePrefix('http://p', true, '/')).toBe('http://p');
  });
});

describe('rewriteLocation', () => {
  it('points a redirect at the upstream to the proxy, path and query kept', () => {
    expect(rewriteLocation('https://api.github.com/repositories/1296269', rewrite)).toBe('http://localhost:8080/repositories/1296269');
    expect(rewriteLocation('https://api.github.com/x?a=1#f', rewrite)).toBe('http://localhost:8080/x?a=1#f');
    expect(rewriteLocation('https://api.github.com', rewrite)).toBe('http://localhost:8080');
  });
  it('hostile: leaves other hosts, look-alikes, other schemes and relative references alone', () => {
    for (const value of [
      'https://github.com/octocat/hello-world',
      'https://api.github.com.evil.example/repositories/1',
      'https://api.github.comevil/x',
      'http://api.github.com/repositories/1',
      '//api.github.com/repositories/1',
      '/repositories/1',
      'javascript:alert(1)',
    ]) {
      expect(rewriteLocation(value, rewrite)).toBe(value);
    }
  });
  it('applies to redirects and 201 only', () => {
    for (const status of [201, 300, 301, 302, 303, 307, 308]) expect(rewritesLocation(status)).toBe(true);
    for (const status of [200, 202, 204, 400, 404, 500]) expect(rewritesLocation(status)).toBe(false);
  });
  it('a Link keeps every URL that is not under the upstream base', () => {
    const link =
      '<https://api.github.com/orgs/o/repos?page=2>; rel="next", <https://elsewhere.example/x>; rel="help", <https://api.github.com#top>; rel="x"';
    expect(rewriteLink(link, rewrite)).toBe(
      '<http://localhost:8080/orgs/o/repos?page=2>; rel="next", <https://elsewhere.example/x>; rel="help", <http://localhost:8080#top>; rel="x"',
    );
  });
});
