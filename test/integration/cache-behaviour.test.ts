/**
 * Cache behaviour against a scripted upstream whose every answer the test controls:
 * coalescing, stale-if-error, size cap, truncation, conditional requests, Vary, invalidation.
 */
import { createHash } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

interface Script {
  status: number;
  headers: Record<string, string>;
  body: string;
  hold?: boolean;
  cut?: boolean;
}

describe('cache behaviour', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  const scripts = new Map<string, Script>();
  const held: Array<() => void> = [];
  let version = 1;

  const etagOf = (body: string) => `W/"${createHash('sha1').update(body).digest('hex')}"`;
  const script = (path: string, overrides: Partial<Script> & { body?: string }) => {
    const body = overrides.body ?? `{"path":"${path}","v":${version}}`;
    scripts.set(path, {
      status: 200,
      headers: {
        'content-type': 'application/json; charset=utf-8',
        'cache-control': 'public, max-age=60, s-maxage=60',
        etag: etagOf(body),
        ...overrides.headers,
      },
      body,
      ...(overrides.hold === undefined ? {} : { hold: overrides.hold }),
      ...(overrides.cut === undefined ? {} : { cut: overrides.cut }),
      ...(overrides.status === undefined ? {} : { status: overrides.status }),
    });
  };
  const hits = (path: string) => upstream.seen.filter((s) => s.url === path).length;

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      const scripted = scripts.get(req.url ?? '') ?? {
        status: 404,
        headers: { 'content-type': 'application/json' },
        body: '{"message":"Not Found"}',
      };
      const send = () => {
        if (scripted.cut) {
          res.writeHead(scripted.status, { ...scripted.headers, 'content-length': String(Buffer.byteLength(scripted.body) + 50) });
          res.write(scripted.body);
          setImmediate(() => res.socket?.destroy());
          return;
        }
        const inm = req.headers['if-none-match'];
        if (inm !== undefined && inm === scripted.headers.etag && scripted.status === 200) {
          const { 'content-type': _ct, ...rest } = scripted.headers;
          res.writeHead(304, rest);
          res.end();
          return;
        }
        res.writeHead(scripted.status, scripted.headers);
        res.end(scripted.body);
      };
      if (scripted.hold) held.push(send);
      else send();
    });
    proxy = await startTestProxy({
      public_url: 'http://proxy.example:8080',
      cache: { max_entry_bytes: 2048 },
      upstreams: [
        { name: 'api', prefix: '/', url: upstream.url, pass_through: true, timeouts: { headers_ms: 2000 } },
        { name: 'reval', prefix: '/reval', url: upstream.url, cache: { policy: 'revalidate' } },
        { name: 'rfc', prefix: '/rfc', url: upstream.url, cache: { policy: 'rfc9111' } },
        { name: 'swr', prefix: '/swr', url: upstream.url, cache: { policy: 'max-age', stale_while_revalidate_seconds: 600 } },
        { name: 'honor', prefix: '/honor', url: upstream.url, cache: { client_no_cache: 'honor' } },
      ],
    });
  });
  afterEach(() => {
    for (const release of held.splice(0)) release();
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  const get = async (path: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET') => {
    const response = await request(`${proxy.url}${path}`, { headers, method });
    return { status: response.statusCode, headers: response.headers, body: await response.body.text() };
  };

  /**
   * The TTL a response just fetched has left of `lifetime`: the Date header's one-second resolution
   * counts as age (RFC 9111 4.2.3), so a response received just after its Date's second turned is
   * a second old (its Age says so) and its TTL a second shorter.
   */
  const ttlLeft = (lifetime: number, headers: Record<string, unknown>): number => {
    const age = Number(headers.age);
    expect([0, 1]).toContain(age);
    return lifetime - age;
  };

  it('serves a stored 200 without going upstream, with Cache-Status and Age', async () => {
    script('/a', {});
    const first = await get('/a');
    expect(first.status).toBe(200);
    expect(first.headers['cache-status']).toBe(`etagere; fwd=miss; fwd-status=200; ttl=${ttlLeft(60, first.headers)}; stored`);
    const second = await get('/a');
    expect(second.body).toBe(first.body);
    expect(second.headers['cache-status']).toMatch(/^etagere; hit; ttl=\d+$/);
    expect(second.headers.age).toMatch(/^\d+$/);
    expect(second.headers.etag).toBe(first.headers.etag);
    expect(second.headers['content-length']).toBe(String(Buffer.byteLength(first.body)));
    expect(hits('/a')).toBe(1);
  });

  it('answers HEAD from the same entry, without a body', async () => {
    script('/head', {});
    const getReply = await get('/head');
    const headReply = await get('/head', {}, 'HEAD');
    expect(headReply.status).toBe(200);
    expect(headReply.body).toBe('');
    expect(headReply.headers['content-length']).toBe(String(Buffer.byteLength(getReply.body)));
    expect(headReply.headers['cache-status']).toMatch(/hit/);
    expect(hits('/head')).toBe(1);
  });

  it('a HEAD miss fills the entry that a later GET uses', async () => {
    script('/head-first', {});
    const headReply = await get('/head-first', {}, 'HEAD');
    expect(headReply.body).toBe('');
    const getReply = await get('/head-first');
    expect(JSON.parse(getReply.body)).toMatchObject({ path: '/head-first' });
    expect(getReply.headers['cache-status']).toMatch(/hit/);
    expect(hits('/head-first')).toBe(1);
  });

  it('coalesces 200 concurrent misses into one upstream request, and all get the body', async () => {
    script('/cold', { hold: true });
    const all = Array.from({ length: 200 }, () => get('/cold'));
    const deadline = Date.now() + 5000;
    while (held.length === 0 && Date.now() < deadline) await new Promise((r) => setImmediate(r));
    // Give every request the chance to arrive before the upstream answers.
    while (proxy.inFlight() < 200 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    held.shift()!();
    const results = await Promise.all(all);
    expect(hits('/cold')).toBe(1);
    expect(new Set(results.map((r) => r.body)).size).toBe(1);
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(results.filter((r) => /collapsed/.test(String(r.headers['cache-status'])))).toHaveLength(199);
  });

  it('shares an upstream failure with every coalesced waiter, and none hangs', async () => {
    script('/cold-fail', { status: 200, cut: true, hold: true });
    const all = Array.from({ length: 20 }, () => get('/cold-fail'));
    const deadline = Date.now() + 5000;
    while (proxy.inFlight() < 20 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    held.shift()!();
    const results = await Promise.all(all);
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(502));
    expect(hits('/cold-fail')).toBe(1);
  });

  it('never stores a truncated body', async () => {
    script('/trunc', { cut: true });
    expect((await get('/trunc')).status).toBe(502);
    script('/trunc', {});
    const ok = await get('/trunc');
    expect(ok.status).toBe(200);
    expect(ok.headers['cache-status']).toMatch(/fwd=miss/);
  });

  it('forces a revalidation on client no-cache (client_no_cache: honor), and a 304 refreshes the entry', async () => {
    script('/honor/nc', {});
    await get('/honor/nc');
    const reply = await get('/honor/nc', { 'cache-control': 'no-cache' });
    expect(reply.status).toBe(200);
    expect(reply.headers['cache-status']).toMatch(/fwd=request; fwd-status=304/);
    expect(upstream.seen.filter((s) => s.url === '/honor/nc').map((s) => s.headers['if-none-match'])).toEqual([
      undefined,
      scripts.get('/honor/nc')!.headers.etag,
    ]);
    const pragmaReply = await get('/honor/nc', { pragma: 'no-cache' });
    expect(pragmaReply.headers['cache-status']).toMatch(/fwd=request/);
  });

  it('a changed resource replaces the stored body', async () => {
    version++;
    script('/changes', {});
    const before = await get('/changes');
    version++;
    script('/changes', {});
    const after = await get('/changes', { 'cache-control': 'max-age=0' });
    expect(after.body).not.toBe(before.body);
    expect(after.headers['cache-status']).toContain(`fwd=request; fwd-status=200; ttl=${ttlLeft(60, after.headers)}; stored`);
    expect((await get('/changes')).body).toBe(after.body);
  });

  it('answers a client If-None-Match that matches with 304 and no body', async () => {
    script('/inm', {});
    const first = await get('/inm');
    const reply = await get('/inm', { 'if-none-match': first.headers.etag as string });
    expect(reply.status).toBe(304);
    expect(reply.body).toBe('');
    expect(reply.headers.etag).toBe(first.headers.etag);
    const other = await get('/inm', { 'if-none-match': 'W/"other"' });
    expect(other.status).toBe(200);
    expect(hits('/inm')).toBe(1);
  });

  it('only-if-cached answers from cache or 504', async () => {
    script('/oic', {});
    const miss = await get('/oic', { 'cache-control': 'only-if-cached' });
    expect(miss.status).toBe(504);
    expect(JSON.parse(miss.body)).toHaveProperty('documentation_url');
    expect(hits('/oic')).toBe(0);
    await get('/oic');
    expect((await get('/oic', { 'cache-control': 'only-if-cached' })).status).toBe(200);
  });

  it('streams bodies above the entry cap through uncached', async () => {
    const big = 'x'.repeat(5000);
    script('/big', { body: big });
    const first = await get('/big');
    const second = await get('/big');
    expect(first.body).toBe(big);
    expect(second.body).toBe(big);
    expect(first.headers['cache-status']).toMatch(/detail=too-large/);
    expect(hits('/big')).toBe(2);
  });

  it('does not store errors (but a 404 or 410: docs/caching.md#not-found), no-store or Set-Cookie responses', async () => {
    script('/e422', { status: 422, body: '{"message":"Validation Failed"}' });
    script('/nostore', { headers: { 'cache-control': 'no-store' } });
    script('/cookie', { headers: { 'set-cookie': 'a=1' } });
    for (const path of ['/e422', '/nostore', '/cookie']) {
      await get(path);
      await get(path);
      expect(hits(path)).toBe(2);
    }
  });

  it('rewrites Link headers to the public URL', async () => {
    script('/list?page=1', { headers: { link: `<${upstream.url}/list?page=2>; rel="next", <https://other.example/x>; rel="help"` } });
    const reply = await get('/list?page=1');
    expect(reply.headers.link).toBe('<http://proxy.example:8080/list?page=2>; rel="next", <https://other.example/x>; rel="help"');
    const again = await get('/list?page=1');
    expect(again.headers.link).toBe(reply.headers.link);
  });

  it('treats query parameter order as the same resource', async () => {
    script('/q?a=1&b=2', {});
    await get('/q?a=1&b=2');
    const reply = await get('/q?b=2&a=1');
    expect(reply.headers['cache-status']).toMatch(/hit/);
  });

  it('keeps Vary-selected variants apart', async () => {
    script('/vary', { headers: { vary: 'Accept, X-Tenant' } });
    await get('/vary', { 'x-tenant': 'a' });
    const tenantB = await get('/vary', { 'x-tenant': 'b' });
    expect(tenantB.headers['cache-status']).toMatch(/fwd=miss/);
    const b2 = await get('/vary', { 'x-tenant': 'b' });
    expect(b2.headers['cache-status']).toMatch(/hit/);
    script('/star', { headers: { vary: '*' } });
    await get('/star');
    await get('/star');
    expect(hits('/star')).toBe(2);
  });

  it('invalidates a path after a successful unsafe method passed through', async () => {
    script('/inv', {});
    await get('/inv');
    expect((await get('/inv')).headers['cache-status']).toMatch(/hit/);
    const post = await request(`${proxy.url}/inv`, { method: 'POST', body: '{}' });
    await post.body.text();
    const after = await get('/inv');
    expect(after.headers['cache-status']).not.toMatch(/hit/);
  });

  it('under revalidate, every request revalidates and 304s keep the body', async () => {
    script('/reval/r', {});
    const first = await get('/reval/r');
    for (let i = 0; i < 4; i++) {
      const reply = await get('/reval/r');
      expect(reply.body).toBe(first.body);
      expect(reply.headers['cache-status']).toBe(`etagere; fwd=stale; fwd-status=304; ttl=${ttlLeft(0, reply.headers)}; stored`);
    }
    expect(hits('/reval/r')).toBe(5);
  });

  it('serves the stored entry when revalidation meets a 5xx or a rate limit, and keeps it', async () => {
    script('/sie', { headers: { 'cache-control': 'public, max-age=0' } });
    const good = await get('/sie');
    script('/sie', { status: 503, body: '{"message":"down"}' });
    const reply = await get('/sie');
    expect(reply.status).toBe(200);
    expect(reply.body).toBe(good.body);
    expect(reply.headers['cache-status']).toMatch(/fwd=stale; fwd-status=503; ttl=-?\d+; detail=stale-if-error/);
    script('/sie', { status: 403, headers: { 'x-ratelimit-remaining': '0' }, body: '{"message":"API rate limit exceeded"}' });
    const limited = await get('/sie');
    expect(limited.body).toBe(good.body);
    expect(limited.headers['cache-status']).toMatch(/fwd-status=403; .*stale-if-error/);
    // A credential error is not transient: the client sees it.
    script('/sie', { status: 401, body: '{"message":"Bad credentials"}' });
    expect((await get('/sie')).status).toBe(401);
  });

  it('stale-while-revalidate serves at once and refreshes in the background', async () => {
    version++;
    script('/swr/x', { headers: { 'cache-control': 'public, max-age=0' } });
    const first = await get('/swr/x');
    version++;
    script('/swr/x', { headers: { 'cache-control': 'public, max-age=60' } });
    const stale = await get('/swr/x');
    expect(stale.body).toBe(first.body);
    expect(stale.headers['cache-status']).toMatch(/hit; ttl=-?\d+; detail=stale-while-revalidate/);
    const deadline = Date.now() + 5000;
    let latest = stale;
    while (latest.body === first.body && Date.now() < deadline) latest = await get('/swr/x');
    expect(latest.body).not.toBe(first.body);
  });

  it('rfc9111 does not store private or authorised responses', async () => {
    script('/rfc/p', { headers: { 'cache-control': 'private, max-age=60' } });
    script('/rfc/auth', { headers: { 'cache-control': 'max-age=60' } });
    await get('/rfc/p');
    await get('/rfc/p');
    expect(hits('/rfc/p')).toBe(2);
    await get('/rfc/auth', { authorization: 'token x' });
    await get('/rfc/auth', { authorization: 'token x' });
    expect(hits('/rfc/auth')).toBe(2);
  });
});
