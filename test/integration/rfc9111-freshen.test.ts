/**
 * Under policy `rfc9111`: freshening a stored response with a 304, as RFC 9111
 * section 4.3.4 says. The 304 selects the stored response by its validators: "If the new response
 * contains one or more strong validators ... If none of the initial set contains at least one of
 * the same strong validators, then the cache MUST NOT use the new response to update any stored
 * responses"; weak validators must correspond; a 304 without validators selects only a stored
 * response without any. A selected response gets the 304's header fields, "replacing field values
 * that are already present", except those section 3.2 excepts (Content-Length, and the fields the
 * stored bytes depend on: their coding and integrity checks). A 304 that selects nothing updates
 * nothing: the proxy asks again without validators, and serves (and stores) that full answer.
 *
 * Every stored response here is stale at once (`max-age=0`), so the next request revalidates.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const LM = 'Mon, 01 Jan 2024 00:00:00 GMT';
const OTHER_LM = 'Tue, 02 Jan 2024 00:00:00 GMT';

/** One resource: what its first full answer says, what a conditional request gets, and its next full answer. */
interface Resource {
  stored: OutgoingHttpHeaders;
  /** Headers of the 304 a conditional request gets. */
  notModified: OutgoingHttpHeaders;
  /** Headers of the full answers after the first (the second representation). */
  next?: OutgoingHttpHeaders;
}

const RESOURCES: Record<string, Resource> = {
  '/strong-match': {
    stored: { etag: '"v1"', 'content-md5': 'djEgYm9keSBkaWdlc3QhIQ==', 'x-note': 'old', 'x-kept': 'kept' },
    notModified: {
      etag: '"v1"',
      'cache-control': 'max-age=3600',
      'content-type': 'application/vnd.example+json',
      'content-md5': 'AAAAAAAAAAAAAAAAAAAAAA==',
      'x-note': 'new',
      'x-added': 'added',
    },
  },
  '/strong-other': {
    stored: { etag: '"v1"' },
    notModified: { etag: '"v2"', 'cache-control': 'max-age=3600', 'x-note': 'from the 304' },
    next: { etag: '"v2"', 'cache-control': 'max-age=3600' },
  },
  '/strong-vs-weak': {
    stored: { etag: 'W/"v1"' },
    notModified: { etag: '"v1"', 'cache-control': 'max-age=3600' },
    next: { etag: '"v1-strong"', 'cache-control': 'max-age=3600' },
  },
  '/weak-match': {
    stored: { etag: 'W/"w1"' },
    notModified: { etag: 'W/"w1"', 'cache-control': 'max-age=3600', 'x-note': 'new' },
  },
  '/weak-other': {
    stored: { etag: 'W/"w1"' },
    notModified: { etag: 'W/"w2"', 'cache-control': 'max-age=3600' },
    next: { etag: 'W/"w2"', 'cache-control': 'max-age=3600' },
  },
  '/last-modified-match': {
    stored: { 'last-modified': LM },
    notModified: { 'last-modified': LM, 'cache-control': 'max-age=3600', 'x-note': 'new' },
  },
  '/last-modified-other': {
    stored: { 'last-modified': LM },
    notModified: { 'last-modified': OTHER_LM, 'cache-control': 'max-age=3600' },
    next: { 'last-modified': OTHER_LM, 'cache-control': 'max-age=3600' },
  },
  '/no-validator-304': {
    stored: { etag: '"v1"' },
    notModified: { 'cache-control': 'max-age=3600' },
    next: { etag: '"v1"', 'cache-control': 'max-age=3600' },
  },
  '/always-304': {
    stored: { etag: '"v1"', 'cache-control': 'max-age=0, must-revalidate' },
    notModified: { etag: '"v2"' },
  },
};

describe('rfc9111: freshening with a 304 (RFC 9111 sections 4.3.4 and 3.2)', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  /** Full answers given per path so far. */
  const full = new Map<string, number>();

  const get = async (path: string) => {
    const res = await request(`${proxy.url}${path}`);
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
  };
  const seen = (path: string) => upstream.seen.filter((s) => s.url === path);
  const conditional = (req: { headers: IncomingMessage['headers'] }) =>
    req.headers['if-none-match'] !== undefined || req.headers['if-modified-since'] !== undefined;

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      const path = req.url ?? '';
      const resource = RESOURCES[path];
      if (resource === undefined) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"message":"Not Found"}');
        return;
      }
      const answered = full.get(path) ?? 0;
      if (answered > 0 && (conditional(req) || path === '/always-304')) {
        res.writeHead(304, resource.notModified);
        res.end();
        return;
      }
      full.set(path, answered + 1);
      const version = answered === 0 ? 1 : 2;
      const headers = answered === 0 ? resource.stored : (resource.next ?? resource.stored);
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=0', ...headers });
      res.end(JSON.stringify({ path, version }));
    });
    proxy = await startTestProxy({ upstreams: [{ name: 'rfc', prefix: '/', url: upstream.url, cache: { policy: 'rfc9111' } }] });
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  /** Stores the first representation; the next request revalidates it. */
  const storeThenRevalidate = async (path: string) => {
    const first = await get(path);
    expect(first.status).toBe(200);
    expect(first.headers['cache-status']).toMatch(/stored/);
    return { first, second: await get(path) };
  };

  it('a 304 with the same strong ETag updates the stored fields, Content-Type included, but not Content-Length or Content-MD5', async () => {
    const { first, second } = await storeThenRevalidate('/strong-match');
    expect(second.status).toBe(200);
    expect(second.body).toBe(first.body);
    expect(second.headers['cache-status']).toMatch(/fwd=stale; fwd-status=304/);
    expect(second.headers['content-type']).toBe('application/vnd.example+json');
    expect(second.headers['x-note']).toBe('new');
    expect(second.headers['x-added']).toBe('added');
    expect(second.headers['x-kept']).toBe('kept');
    expect(second.headers['content-md5']).toBe('djEgYm9keSBkaWdlc3QhIQ==');
    expect(second.headers['content-length']).toBe(String(Buffer.byteLength(first.body)));
    expect(second.headers.etag).toBe('"v1"');
    // The 304's Cache-Control is the stored one now: fresh for an hour.
    const third = await get('/strong-match');
    expect(third.headers['cache-status']).toMatch(/^etagere; hit; ttl=(3600|3599)$/);
    expect(third.headers['content-type']).toBe('application/vnd.example+json');
    expect(seen('/strong-match')).toHaveLength(2);
  });

  it.each([
    ['/strong-other', 'a different strong ETag', '"v2"'],
    ['/strong-vs-weak', 'a strong ETag where a weak one is stored (strong comparison)', '"v1-strong"'],
    ['/weak-other', 'a different weak ETag', 'W/"w2"'],
    ['/no-validator-304', 'no validator where one is stored', '"v1"'],
  ])('%s: a 304 with %s updates nothing; the proxy asks again unconditionally and serves that answer', async (path, _what, etag) => {
    const { second } = await storeThenRevalidate(path);
    expect(second.status).toBe(200);
    expect(JSON.parse(second.body)).toEqual({ path, version: 2 });
    expect(second.headers.etag).toBe(etag);
    expect(second.headers['x-note']).toBeUndefined();
    const requests = seen(path);
    expect(requests).toHaveLength(3);
    expect(conditional(requests[1]!)).toBe(true);
    expect(conditional(requests[2]!)).toBe(false);
    // What is stored is the second representation with its own validator, served fresh.
    const third = await get(path);
    expect(third.headers['cache-status']).toMatch(/^etagere; hit/);
    expect(third.body).toBe(second.body);
    expect(third.headers.etag).toBe(etag);
  });

  it('/last-modified-other: a 304 with another Last-Modified updates nothing either', async () => {
    const { second } = await storeThenRevalidate('/last-modified-other');
    expect(JSON.parse(second.body)).toEqual({ path: '/last-modified-other', version: 2 });
    expect(second.headers['last-modified']).toBe(OTHER_LM);
    expect(seen('/last-modified-other')).toHaveLength(3);
  });

  it.each(['/weak-match', '/last-modified-match'])(
    '%s: a 304 whose weak validators correspond freshens the stored response',
    async (path) => {
      const { first, second } = await storeThenRevalidate(path);
      expect(second.body).toBe(first.body);
      expect(second.headers['cache-status']).toMatch(/fwd=stale; fwd-status=304/);
      expect(second.headers['x-note']).toBe('new');
      expect(seen(path)).toHaveLength(2);
      expect((await get(path)).headers['cache-status']).toMatch(/^etagere; hit/);
    },
  );

  it('an upstream that answers 304 even to an unconditional request never gets the stored body served as its answer (must-revalidate: 502)', async () => {
    const { first, second } = await storeThenRevalidate('/always-304');
    expect(second.status).toBe(502);
    expect(second.body).not.toBe(first.body);
    expect(JSON.parse(second.body)).toHaveProperty('documentation_url');
    expect(seen('/always-304')).toHaveLength(3);
    // The stored response kept its own ETag: the next revalidation still sends it.
    expect((await get('/always-304')).status).toBe(502);
    expect(seen('/always-304')[3]!.headers['if-none-match']).toBe('"v1"');
  });
});
