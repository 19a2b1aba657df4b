import { describe, expect, it } from 'vitest';
import { requestHeadersForUpstream, responseHeadersForClient } from '../../src/http/headers/hop-by-hop.js';

describe('hop-by-hop headers', () => {
  it('drops hop-by-hop and Connection-named headers from requests, and host/content-length', () => {
    const out = requestHeadersForUpstream({
      host: 'proxy',
      connection: 'keep-alive, X-Secret-Hop',
      'keep-alive': 'timeout=5',
      'x-secret-hop': '1',
      te: 'trailers',
      'transfer-encoding': 'chunked',
      'content-length': '0',
      upgrade: 'h2c',
      'proxy-authorization': 'Basic abc',
      accept: 'application/vnd.github+json',
      authorization: 'token t',
      'x-github-api-version': '2022-11-28',
    });
    expect(out).toEqual({
      accept: 'application/vnd.github+json',
      authorization: 'token t',
      'x-github-api-version': '2022-11-28',
    });
  });

  it('keeps every end-to-end response header, including repeated ones', () => {
    const out = responseHeadersForClient({
      etag: 'W/"x"',
      'set-cookie': ['a=1', 'b=2'],
      'transfer-encoding': 'chunked',
      connection: 'close',
      'x-ratelimit-remaining': '59',
      'content-length': '10',
    });
    expect(out).toEqual({ etag: 'W/"x"', 'set-cookie': ['a=1', 'b=2'], 'x-ratelimit-remaining': '59', 'content-length': '10' });
  });
});
