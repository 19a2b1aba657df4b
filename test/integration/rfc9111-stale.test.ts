/**
 * Under policy `rfc9111`: a stale response that a directive forbids serving
 * stale is never served, whatever happens upstream (RFC 9111 section 4.2.4: "A cache MUST NOT
 * generate a stale response if it is prohibited by an explicit in-protocol directive (e.g., by a
 * no-cache response directive, a must-revalidate response directive, or an applicable s-maxage or
 * proxy-revalidate response directive"); section 5.2.2.2: "if a cache is disconnected, the cache
 * MUST generate an error response rather than reuse the stale response"). A stale
 * `must-revalidate` response is revalidated with a conditional request carrying both its
 * validators (section 4.3.1). The GitHub policies keep their operator-chosen stale-if-error.
 *
 * Stored responses are made stale without waiting: their Date is two hours old, so their apparent
 * age (section 4.2.3) is past any max-age used here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

/** What the upstream does with the next request for a path. */
type Mode = 'ok' | 'reset' | '503' | 'hang';

const TWO_HOURS_AGO = () => new Date(Date.now() - 7_200_000).toUTCString();
const LAST_MODIFIED = 'Mon, 01 Jan 2024 00:00:00 GMT';

describe('rfc9111: stale responses that may not be served stale', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  const modes = new Map<string, Mode>();
  const cacheControl = new Map<string, string>();

  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await request(`${proxy.url}${path}`, { headers });
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
  };
  const seen = (path: string) => upstream.seen.filter((s) => s.url === path);

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      const path = (req.url ?? '').replace(/^\/(rfc|gh)/, '');
      const mode = modes.get(path) ?? 'ok';
      if (mode === 'reset') {
        req.socket.destroy();
        return;
      }
      if (mode === 'hang') return;
      if (mode === '503') {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end('{"message":"down"}');
        return;
      }
      res.writeHead(200, {
        'content-type': 'application/json',
        'cache-control': cacheControl.get(path) ?? 'max-age=3600',
        date: TWO_HOURS_AGO(),
        etag: `"${path}-v1"`,
        'last-modified': LAST_MODIFIED,
      });
      res.end(JSON.stringify({ path }));
    });
    proxy = await startTestProxy({
      upstreams: [
        { name: 'rfc', prefix: '/rfc', url: upstream.url, timeouts: { headers_ms: 300 }, cache: { policy: 'rfc9111' } },
        { name: 'gh', prefix: '/gh', url: upstream.url, timeouts: { headers_ms: 300 }, cache: { policy: 'max-age' } },
      ],
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  /** Stores `path` under `cc` (as a stale response), then makes the upstream fail as `mode`. */
  const storeStale = async (prefix: '/rfc' | '/gh', path: string, cc: string, mode: Mode) => {
    cacheControl.set(path, cc);
    modes.set(path, 'ok');
    const first = await get(prefix + path);
    expect(first.status).toBe(200);
    expect(first.headers['cache-status']).toMatch(/stored/);
    modes.set(path, mode);
    return first;
  };

  const forbidding = [
    ['must-revalidate', 'max-age=3600, must-revalidate'],
    ['proxy-revalidate', 'max-age=3600, proxy-revalidate'],
    ['no-cache', 'no-cache'],
    ['s-maxage', 's-maxage=3600'],
  ] as const;

  for (const [name, cc] of forbidding) {
    it(`${name}: a connection closed by the origin gives 502, not the stale entry`, async () => {
      const path = `/${name}/reset`;
      await storeStale('/rfc', path, `${cc}, stale-if-error=86400`, 'reset');
      const reply = await get(`/rfc${path}`);
      expect(reply.status).toBe(502);
      expect(JSON.parse(reply.body)).toHaveProperty('documentation_url');
      expect(reply.headers['cache-status'] ?? '').not.toMatch(/stale-if-error/);
    });

    it(`${name}: an origin that does not answer gives 504, not the stale entry`, async () => {
      const path = `/${name}/hang`;
      await storeStale('/rfc', path, cc, 'hang');
      const reply = await get(`/rfc${path}`);
      expect(reply.status).toBe(504);
    });

    it(`${name}: an origin 5xx is passed on, not replaced by the stale entry`, async () => {
      const path = `/${name}/503`;
      await storeStale('/rfc', path, cc, '503');
      const reply = await get(`/rfc${path}`);
      expect(reply.status).toBe(503);
      expect(reply.body).toBe('{"message":"down"}');
    });

    it(`${name}: neither max-stale nor stale-while-revalidate serves it stale`, async () => {
      const path = `/${name}/max-stale`;
      await storeStale('/rfc', path, `${cc}, stale-while-revalidate=86400`, 'reset');
      expect((await get(`/rfc${path}`, { 'cache-control': 'max-stale=86400' })).status).toBe(502);
      expect((await get(`/rfc${path}`)).status).toBe(502);
      expect((await get(`/rfc${path}`, { 'cache-control': 'only-if-cached, max-stale' })).status).toBe(504);
    });
  }

  it('an origin that is gone (connection refused) gives 502 for a stale must-revalidate entry', async () => {
    const gone = await startScriptedUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=3600, must-revalidate', date: TWO_HOURS_AGO() });
      res.end('{"stored":"yes"}');
    });
    const own = await startTestProxy({ upstreams: [{ name: 'gone', prefix: '/', url: gone.url, cache: { policy: 'rfc9111' } }] });
    try {
      const first = await request(`${own.url}/x`);
      expect(first.headers['cache-status']).toMatch(/stored/);
      await first.body.dump();
      await gone.close();
      const reply = await request(`${own.url}/x`);
      expect(reply.statusCode).toBe(502);
      expect(await reply.body.text()).not.toContain('stored');
    } finally {
      await own.close();
    }
  });

  it('a stale max-age=N, must-revalidate response is revalidated with its ETag and Last-Modified', async () => {
    const path = '/conditional';
    await storeStale('/rfc', path, 'max-age=3600, must-revalidate', 'ok');
    const again = await get(`/rfc${path}`);
    expect(again.status).toBe(200);
    const revalidation = seen(`/rfc${path}`).at(-1)!;
    expect(revalidation.headers['if-none-match']).toBe(`"${path}-v1"`);
    expect(revalidation.headers['if-modified-since']).toBe(LAST_MODIFIED);
  });

  it('an entry that goes stale while stored is kept, and revalidated conditionally (a 304 refreshes it)', async () => {
    const path = '/ages';
    let served = 0;
    const own = await startScriptedUpstream((req, res) => {
      const headers = { 'cache-control': 'max-age=1, must-revalidate', etag: '"ages"', 'last-modified': LAST_MODIFIED };
      if (req.headers['if-none-match'] === '"ages"') {
        res.writeHead(304, headers);
        res.end();
        return;
      }
      served++;
      res.writeHead(200, { ...headers, 'content-type': 'application/json' });
      res.end('{"ages":1}');
    });
    const agesProxy = await startTestProxy({ upstreams: [{ name: 'ages', prefix: '/', url: own.url, cache: { policy: 'rfc9111' } }] });
    try {
      const first = await request(`${agesProxy.url}${path}`);
      await first.body.dump();
      const storedAt = Date.now();
      await until(() => Date.now() > storedAt + 1_100, 3_000, 'the entry to go stale');
      const again = await request(`${agesProxy.url}${path}`);
      expect(again.statusCode).toBe(200);
      expect(await again.body.text()).toBe('{"ages":1}');
      expect(again.headers['cache-status']).toMatch(/fwd=stale; fwd-status=304/);
      expect(own.seen.at(-1)!.headers['if-modified-since']).toBe(LAST_MODIFIED);
      expect(served).toBe(1);
    } finally {
      await agesProxy.close();
      await own.close();
    }
  });

  it('a stale response without such a directive is still served stale when the origin fails (stale-if-error)', async () => {
    const path = '/plain';
    const first = await storeStale('/rfc', path, 'max-age=3600', 'reset');
    const reply = await get(`/rfc${path}`);
    expect(reply.status).toBe(200);
    expect(reply.body).toBe(first.body);
    expect(reply.headers['cache-status']).toMatch(/detail=stale-if-error/);
  });

  it('the GitHub policy keeps the operator-chosen stale-if-error, must-revalidate or not', async () => {
    const path = '/github';
    const first = await storeStale('/gh', path, 'private, max-age=60, s-maxage=60, must-revalidate', 'reset');
    const reply = await get(`/gh${path}`);
    expect(reply.status).toBe(200);
    expect(reply.body).toBe(first.body);
    expect(reply.headers['cache-status']).toMatch(/detail=stale-if-error/);
  });
});
