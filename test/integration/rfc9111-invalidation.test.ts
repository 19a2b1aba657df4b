/**
 * Invalidation after unsafe methods (RFC 9111 section 4.4). "A cache MUST
 * invalidate the target URI when it receives a non-error status code in response to an unsafe
 * request method (including methods whose safety is unknown)"; the URIs in Location and
 * Content-Location are invalidated too, but never on another origin than the target URI's. A
 * "non-error response" is a 2xx or 3xx. GET, HEAD, OPTIONS and TRACE are the safe methods (RFC
 * 9110 section 9.2.1). With Redis, every replica stops serving what was invalidated.
 *
 * Methods reach the proxy through Node's HTTP parser, which knows a fixed list (M-SEARCH, PURGE,
 * LINK... among them): a method outside it is answered 400 by the proxy and reaches no upstream,
 * so it changes nothing upstream that a cache would need to forget.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

/** What the upstream answers to the next unsafe request. */
interface UnsafeAnswer {
  status: number;
  headers: Record<string, string>;
}

describe('rfc9111: invalidation after unsafe methods (RFC 9111 section 4.4)', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  let unsafe: UnsafeAnswer = { status: 200, headers: {} };
  let version = 0;

  const get = async (base: string, path: string) => {
    const res = await request(`${base}${path}`);
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
  };
  const isHit = async (base: string, path: string) => /^etagere; hit/.test(String((await get(base, path)).headers['cache-status']));
  const send = async (base: string, method: string, path: string) => {
    const res = await request(`${base}${path}`, { method, body: method === 'TRACE' ? null : '{}' });
    await res.body.dump();
    return res.statusCode;
  };
  /** Stores each path, and checks that the next GET is a hit. */
  const storeAll = async (base: string, ...paths: string[]) => {
    for (const path of paths) {
      await get(base, path);
      expect(await isHit(base, path)).toBe(true);
    }
  };

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      if (req.method === 'GET' || req.method === 'HEAD') {
        version++;
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=3600', etag: `"${version}"` });
        res.end(JSON.stringify({ path: req.url, version }));
        return;
      }
      res.writeHead(unsafe.status, { 'content-type': 'application/json', ...unsafe.headers });
      res.end('{}');
    });
    proxy = await startTestProxy({
      upstreams: [{ name: 'rfc', prefix: '/', url: upstream.url, pass_through: true, cache: { policy: 'rfc9111' } }],
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  it.each([
    ['POST', 200],
    ['PUT', 204],
    ['PATCH', 200],
    ['DELETE', 204],
    ['M-SEARCH', 200],
    ['PURGE', 200],
    ['LINK', 200],
    ['POST', 303],
    ['POST', 201],
  ])('a %s answered %d invalidates its target', async (method, status) => {
    const path = `/target/${method}/${status}`;
    await storeAll(proxy.url, path, `${path}?page=2`);
    unsafe = { status, headers: {} };
    expect(await send(proxy.url, method, path)).toBe(status);
    expect(upstream.seen.at(-1)!.method).toBe(method);
    expect(await isHit(proxy.url, path)).toBe(false);
    // Every stored response of the target URI's path, whatever its query.
    expect(await isHit(proxy.url, `${path}?page=2`)).toBe(false);
  });

  it.each([
    ['OPTIONS', 200],
    ['TRACE', 200],
    ['POST', 400],
    ['POST', 404],
    ['POST', 409],
    ['DELETE', 500],
    ['PUT', 503],
  ])('a %s answered %d invalidates nothing (a safe method, or an error)', async (method, status) => {
    const path = `/kept/${method}/${status}`;
    await storeAll(proxy.url, path);
    unsafe = { status, headers: {} };
    expect(await send(proxy.url, method, path)).toBe(status);
    expect(await isHit(proxy.url, path)).toBe(true);
  });

  it('Location and Content-Location on the same origin are invalidated: the upstream URL, a relative one, the proxy URL', async () => {
    const paths = ['/items/1', '/items/2', '/items/3', '/items/4'];
    await storeAll(proxy.url, ...paths);
    unsafe = { status: 201, headers: { location: `${upstream.url}/items/1`, 'content-location': 'items/2' } };
    expect(await send(proxy.url, 'POST', '/items')).toBe(201);
    expect(await isHit(proxy.url, '/items/1')).toBe(false);
    expect(await isHit(proxy.url, '/items/2')).toBe(false);
    unsafe = { status: 200, headers: { 'content-location': `${proxy.url}/items/3` } };
    expect(await send(proxy.url, 'PUT', '/items/other')).toBe(200);
    expect(await isHit(proxy.url, '/items/3')).toBe(false);
    expect(await isHit(proxy.url, '/items/4')).toBe(true);
  });

  it('never a Location or Content-Location on another origin (another host, a look-alike, another port), nor after an error', async () => {
    const paths = ['/safe/1', '/safe/2', '/safe/3'];
    await storeAll(proxy.url, ...paths);
    const port = Number(new URL(upstream.url).port);
    for (const location of [
      'http://elsewhere.example/safe/1',
      `http://127.0.0.1.evil.example:${port}/safe/1`,
      `http://127.0.0.1:${port + 1}/safe/2`,
      `https://127.0.0.1:${port}/safe/2`,
    ]) {
      unsafe = { status: 201, headers: { location, 'content-location': location } };
      expect(await send(proxy.url, 'POST', '/safe')).toBe(201);
    }
    unsafe = { status: 409, headers: { location: '/safe/3' } };
    expect(await send(proxy.url, 'POST', '/safe')).toBe(409);
    for (const path of paths) expect(await isHit(proxy.url, path)).toBe(true);
  });

  it('a method outside Node’s list is answered 400 JSON, reaches no upstream, and leaves the cache as it was', async () => {
    await storeAll(proxy.url, '/brew');
    const before = upstream.seen.length;
    const res = await request(`${proxy.url}/brew`, { method: 'BREW', body: '{}' });
    expect(res.statusCode).toBe(400);
    expect((await res.body.json()) as object).toHaveProperty('documentation_url');
    expect(upstream.seen.length).toBe(before);
    expect(await isHit(proxy.url, '/brew')).toBe(true);
  });
});

describe('rfc9111: invalidation reaches every replica (Redis)', () => {
  let redis: TestRedis;
  let upstream: ScriptedUpstream;
  let replicaA: TestProxy;
  let replicaB: TestProxy;
  let version = 0;

  const read = async (base: string, path: string) => {
    const res = await request(`${base}${path}`);
    return { hit: /^etagere; hit/.test(String(res.headers['cache-status'])), body: await res.body.text() };
  };

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startScriptedUpstream((req, res) => {
      if (req.method === 'GET') {
        version++;
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=3600', etag: `"${version}"` });
        res.end(JSON.stringify({ version }));
        return;
      }
      res.writeHead(201, { 'content-type': 'application/json', location: '/orders/2' });
      res.end('{}');
    });
    const config = () => ({
      upstreams: [{ name: 'rfc', prefix: '/', url: upstream.url, pass_through: true, cache: { policy: 'rfc9111' } }],
      redis: { url: redis.url, key_prefix: 'etagere-rfc9111-invalidation:' },
      cache: { partition_secret: 'shared-secret-of-the-replicas' },
    });
    replicaA = await startTestProxy(config());
    replicaB = await startTestProxy(config());
    await until(() => replicaA.metrics.redisUp.get().then((m) => m.values[0]?.value === 1), 5_000, 'replica a connected');
    await until(() => replicaB.metrics.redisUp.get().then((m) => m.values[0]?.value === 1), 5_000, 'replica b connected');
  });
  afterAll(async () => {
    await replicaA?.close();
    await replicaB?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('a POST through one replica invalidates its target and Location on the other (L1 and L2)', async () => {
    const before = new Map<string, string>();
    for (const path of ['/orders', '/orders/2', '/orders/3']) {
      const stored = await read(replicaA.url, path);
      expect(stored.hit).toBe(false);
      // B finds A's entry in L2 and keeps its own copy in L1.
      await until(async () => (await read(replicaB.url, path)).hit, 5_000, `replica b to serve ${path} from cache`);
      expect(await read(replicaB.url, path)).toEqual({ hit: true, body: stored.body });
      before.set(path, stored.body);
    }
    const post = await request(`${replicaA.url}/orders`, { method: 'POST', body: '{}' });
    expect(post.statusCode).toBe(201);
    await post.body.dump();
    // On A at once; on B once the notice arrives: neither serves what it held before.
    expect((await read(replicaA.url, '/orders')).body).not.toBe(before.get('/orders'));
    // /orders/2 is not asked for again on A: only the invalidation notice can make B drop it.
    for (const path of ['/orders', '/orders/2'])
      await until(async () => (await read(replicaB.url, path)).body !== before.get(path), 5_000, `replica b to drop ${path}`);
    expect(await read(replicaB.url, '/orders/3')).toEqual({ hit: true, body: before.get('/orders/3') });
  });
});
