/**
 * The pure header rules of src/http/headers/hop-by-hop.ts that make the cache
 * key and the upstream request agree, and that keep a pooled request's headers to an allowlist.
 */
import { describe, expect, it } from 'vitest';
import { describesToken, dropHopByHop, keepPoolHeaders, requestHeadersForUpstream } from '../../src/http/headers/hop-by-hop.js';

describe('dropHopByHop', () => {
  it('drops every header Connection names, and the hop-by-hop ones, in place', () => {
    const headers: Record<string, string | undefined> = {
      host: 'proxy',
      connection: 'close, X-GitHub-Api-Version, Accept',
      'x-github-api-version': '2026-03-10',
      accept: 'application/vnd.github.raw+json',
      te: 'trailers',
      upgrade: 'h2c',
      'keep-alive': 'timeout=5',
      'user-agent': 'ua',
    };
    dropHopByHop(headers);
    expect(headers).toEqual({ host: 'proxy', connection: 'close, X-GitHub-Api-Version, Accept', 'user-agent': 'ua' });
    // What is left is exactly what goes upstream.
    expect(requestHeadersForUpstream(headers)).toEqual({ 'user-agent': 'ua' });
  });

  it('hostile: Connection naming Host keeps Host; plain keep-alive and close change nothing', () => {
    const named: Record<string, string> = { host: 'proxy', connection: 'host, cookie', cookie: 'a=1' };
    dropHopByHop(named);
    expect(named).toEqual({ host: 'proxy', connection: 'host, cookie' });
    for (const connection of ['keep-alive', 'close']) {
      const plain: Record<string, string> = { host: 'proxy', connection, accept: 'a' };
      dropHopByHop(plain);
      expect(plain).toEqual({ host: 'proxy', connection, accept: 'a' });
    }
  });
});

describe('pooled requests', () => {
  const sent = {
    host: 'proxy',
    accept: 'application/vnd.github+json',
    'user-agent': 'ua',
    'x-github-api-version': '2022-11-28',
    'if-none-match': 'W/"x"',
    range: 'bytes=0-1',
    'cache-control': 'no-cache',
    'x-forwarded-host': 'p.example',
    'x-http-method-override': 'DELETE',
    'x-original-url': '/admin',
    forwarded: 'for=1.2.3.4',
    'x-forwarded-for': '1.2.3.4',
    cookie: 'a=1',
    'x-github-otp': '123456',
    'x-requested-with': 'XMLHttpRequest',
    'time-zone': 'Europe/Helsinki',
  };

  it('forward only the allowlist', () => {
    expect(requestHeadersForUpstream(sent, true)).toEqual({
      accept: 'application/vnd.github+json',
      'user-agent': 'ua',
      'x-github-api-version': '2022-11-28',
      'if-none-match': 'W/"x"',
      range: 'bytes=0-1',
    });
  });

  it('keep only what is forwarded or what the proxy reads itself, so nothing else selects an entry', () => {
    const headers: Record<string, string> = { ...sent };
    keepPoolHeaders(headers);
    expect(Object.keys(headers).sort()).toEqual(
      ['accept', 'cache-control', 'host', 'if-none-match', 'range', 'user-agent', 'x-forwarded-host', 'x-github-api-version'].sort(),
    );
  });

  it('blanking (a GET or HEAD) leaves the same upstream headers and the same readable values as deleting', () => {
    const deleted: Record<string, string | undefined> = { ...sent };
    const blanked: Record<string, string | undefined> = { ...sent };
    keepPoolHeaders(deleted);
    keepPoolHeaders(blanked, 'blank');
    expect(requestHeadersForUpstream(blanked, true)).toEqual(requestHeadersForUpstream(deleted, true));
    expect(requestHeadersForUpstream(blanked)).toEqual(requestHeadersForUpstream(deleted));
    for (const name of Object.keys(sent)) expect(blanked[name]).toBe(deleted[name]);
    // Blanked twice: nothing changes.
    keepPoolHeaders(blanked, 'blank');
    expect(requestHeadersForUpstream(blanked, true)).toEqual(requestHeadersForUpstream(deleted, true));
  });

  it("a client's own request forwards its end-to-end headers as before", () => {
    expect(requestHeadersForUpstream(sent)).toMatchObject({ cookie: 'a=1', 'x-github-otp': '123456', 'time-zone': 'Europe/Helsinki' });
  });

  it('token-describing response headers are named', () => {
    expect(describesToken('X-OAuth-Scopes')).toBe(true);
    expect(describesToken('github-authentication-token-expiration')).toBe(true);
    expect(describesToken('x-accepted-oauth-scopes')).toBe(false);
  });
});
