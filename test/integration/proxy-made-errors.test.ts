/**
 * The 502s and 504s the proxy makes itself, when the upstream cannot be reached (ENOTFOUND,
 * ECONNREFUSED), cuts the connection or does not answer in time, carry Cache-Status
 * (RFC 9211) like every other answer of a caching upstream, with the failure as its detail; a
 * pass-through upstream (policy none) sends none, as its other answers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { deadPort, startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

describe('answers the proxy makes itself carry Cache-Status', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  const held: Array<() => void> = [];

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      if (req.url?.includes('/reset')) res.socket?.destroy();
      else held.push(() => res.end('{}'));
    });
    const dead = await deadPort();
    const fast = { timeouts: { headers_ms: 300 }, retries: 0 };
    proxy = await startTestProxy({
      upstreams: [
        { name: 'gh', prefix: '/', url: upstream.url, ...fast },
        { name: 'nowhere', prefix: '/nowhere', url: 'http://etagere-test.invalid', ...fast },
        { name: 'down', prefix: '/down', url: `http://127.0.0.1:${dead}`, ...fast },
        { name: 'plain', prefix: '/plain', url: upstream.url, cache: { policy: 'none' }, ...fast },
      ],
    });
  });
  afterAll(async () => {
    for (const release of held) release();
    await proxy?.close();
    await upstream?.close();
  });

  it.each([
    ['an unknown host', '/nowhere/repos/o/r', 502, 'etagere; fwd=miss; detail=ENOTFOUND'],
    ['a refused connection', '/down/repos/o/r', 502, 'etagere; fwd=miss; detail=ECONNREFUSED'],
    ['a connection the upstream cuts', '/repos/o/reset', 502, 'etagere; fwd=miss; detail=UND_ERR_SOCKET'],
    ['no answer in time', '/repos/o/held', 504, 'etagere; fwd=miss; detail=UND_ERR_HEADERS_TIMEOUT'],
    ['a Range request (forwarded, not cached) cut', '/repos/o/reset?range', 502, 'etagere; fwd=bypass; detail=UND_ERR_SOCKET'],
  ])('%s: %s answers %i with Cache-Status %s', async (_what, path, status, cacheStatus) => {
    const headers = path.endsWith('?range') ? { range: 'bytes=0-1' } : {};
    const res = await request(`${proxy.url}${path}`, { headers });
    expect(res.statusCode).toBe(status);
    expect(res.headers['cache-status']).toBe(cacheStatus);
    expect(await res.body.json()).toMatchObject({ message: expect.stringMatching(/^(Bad Gateway|Gateway Timeout): upstream/) });
  });

  it('a pass-through upstream (policy none) sends no Cache-Status, on its errors as on its answers', async () => {
    const res = await request(`${proxy.url}/plain/repos/o/reset`);
    expect(res.statusCode).toBe(502);
    expect(res.headers['cache-status']).toBeUndefined();
    await res.body.dump();
  });
});
