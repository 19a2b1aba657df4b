/**
 * Compression end to end. The proxy asks the upstream for gzip and keeps the
 * gzip bytes; a client that takes gzip gets them as they are, one that does not gets them decoded,
 * with the same content. Strong ETags are weakened when the proxy changes the coding, GitHub's weak
 * ones stay; `no-transform` is honoured (a client that refused the stored coding has its own request
 * forwarded: no-transform.test.ts has more); a body that fails to decode is never stored; HEAD and 304
 * follow the same rules; policy `none` streams the upstream's coding unchanged.
 */
import { randomBytes } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { Octokit } from '@octokit/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { sendRaw as send } from '../helpers/raw-request.js';

const GZIP = { 'accept-encoding': 'gzip, deflate, br' };
const IDENTITY = { 'accept-encoding': 'identity' };
const TOKEN = { authorization: 'token cz_client_alice' };
const LIST = '/orgs/etagere-org/repos?per_page=100';

describe('compression through the cache (fake upstream, client credentials)', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ tokens: parseTokenSpec('cz_client_alice@alice:repo') });
    proxy = await startTestProxy({ upstreams: [{ name: 'github', prefix: '/', url: fake.url }] });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('gzip and identity clients get byte-identical content from one upstream request; gzip on the wire is under 0.2x identity', async () => {
    const before = fake.stats().total;
    const gzip = await send(`${proxy.url}${LIST}`, { ...TOKEN, ...GZIP });
    const identity = await send(`${proxy.url}${LIST}`, { ...TOKEN, ...IDENTITY });
    const none = await send(`${proxy.url}${LIST}`, TOKEN);
    expect(fake.stats().total - before).toBe(1);
    expect(gzip.status).toBe(200);
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(String(gzip.headers.vary)).toMatch(/Accept-Encoding/i);
    expect(Number(gzip.headers['content-length'])).toBe(gzip.body.length);
    for (const plain of [identity, none]) {
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(String(plain.headers.vary)).toMatch(/Accept-Encoding/i);
      expect(Number(plain.headers['content-length'])).toBe(plain.body.length);
      expect(gunzipSync(gzip.body).equals(plain.body)).toBe(true);
    }
    expect((JSON.parse(identity.body.toString('utf8')) as unknown[]).length).toBeGreaterThan(10);
    expect(gzip.body.length).toBeLessThan(identity.body.length * 0.2);
    // GitHub's weak ETag is the same for both codings.
    expect(gzip.headers.etag).toMatch(/^W\//);
    expect(identity.headers.etag).toBe(gzip.headers.etag);
  });

  it('holds the header fields common to many responses once, and serves every field as the upstream sent it', async () => {
    // Query strings of their own: other tests here need these paths uncached.
    const paths = ['/repos/octocat/hello-world?shared=1', '/repos/octocat/spoon-knife?shared=1', '/orgs/etagere-org?shared=1'];
    for (const path of paths) {
      const direct = await send(`${fake.url}${path}`, { ...TOKEN, ...GZIP });
      await send(`${proxy.url}${path}`, { ...TOKEN, ...GZIP });
      const hit = await send(`${proxy.url}${path}`, { ...TOKEN, ...GZIP });
      expect(hit.headers['cache-status']).toMatch(/hit/);
      for (const name of ['content-security-policy', 'access-control-expose-headers', 'vary', 'etag', 'last-modified'])
        expect(hit.headers[name], `${path} ${name}`).toBe(direct.headers[name]);
      expect(hit.headers['x-github-request-id']).toMatch(/\S/);
    }
    const metrics = await (await fetch(`${proxy.adminUrl}/metrics`)).text();
    const shared = Number(/etagere_cache_bytes\{tier="shared_headers"\} (\d+)/.exec(metrics)?.[1]);
    expect(shared).toBeGreaterThan(0);
    expect(shared).toBeLessThan(1_300_000);
  });

  it('HEAD and 304 follow the same rules', async () => {
    const path = '/repos/octocat/hello-world';
    const full = await send(`${proxy.url}${path}`, { ...TOKEN, ...IDENTITY });
    const gzipHead = await send(`${proxy.url}${path}`, { ...TOKEN, ...GZIP }, 'HEAD');
    const identityHead = await send(`${proxy.url}${path}`, { ...TOKEN, ...IDENTITY }, 'HEAD');
    expect(gzipHead.headers['content-encoding']).toBe('gzip');
    expect(Number(gzipHead.headers['content-length'])).toBeLessThan(full.body.length);
    expect(identityHead.headers['content-encoding']).toBeUndefined();
    expect(identityHead.headers['content-length']).toBe(String(full.body.length));
    expect(gzipHead.body.length + identityHead.body.length).toBe(0);
    for (const coding of [GZIP, IDENTITY]) {
      const again = await send(`${proxy.url}${path}`, { ...TOKEN, ...coding, 'if-none-match': String(full.headers.etag) });
      expect(again.status).toBe(304);
      expect(again.headers['content-encoding']).toBeUndefined();
      expect(again.headers.etag).toBe(full.headers.etag);
      expect(again.body.length).toBe(0);
    }
  });

  it('a gzip body that fails to decode is a 502 and never stored; the next request asks again', async () => {
    const path = '/repos/octocat/spoon-knife';
    await fetch(`${fake.url}/__fake/faults`, { method: 'POST', body: JSON.stringify({ faults: [{ kind: 'bad-gzip', count: 1 }] }) });
    const before = fake.stats().total;
    const bad = await send(`${proxy.url}${path}`, { ...TOKEN, ...GZIP });
    expect(bad.status).toBe(502);
    expect(JSON.parse(bad.body.toString('utf8'))).toHaveProperty('documentation_url');
    const good = await send(`${proxy.url}${path}`, { ...TOKEN, ...IDENTITY });
    expect(good.status).toBe(200);
    expect(fake.stats().total - before).toBe(2);
    expect(JSON.parse(good.body.toString('utf8'))).toHaveProperty('full_name');
  });

  it('a gzipped body that is not JSON is refused (checked decoded, at store time)', async () => {
    const path = '/users/octocat';
    await fetch(`${fake.url}/__fake/faults`, { method: 'POST', body: JSON.stringify({ faults: [{ kind: 'bad-json', count: 1 }] }) });
    const bad = await send(`${proxy.url}${path}`, { ...TOKEN, ...GZIP });
    expect(bad.status).toBe(502);
    const good = await send(`${proxy.url}${path}`, { ...TOKEN, ...GZIP });
    expect(good.status).toBe(200);
    expect(JSON.parse(gunzipSync(good.body).toString('utf8'))).toHaveProperty('login', 'octocat');
  });

  it('exports stored and decoded body bytes and their ratio', async () => {
    const metrics = await (await fetch(`${proxy.adminUrl}/metrics`)).text();
    const stored = Number(/etagere_cache_body_bytes\{form="stored"\} (\d+)/.exec(metrics)?.[1]);
    const decoded = Number(/etagere_cache_body_bytes\{form="decoded"\} (\d+)/.exec(metrics)?.[1]);
    const ratio = Number(/^etagere_cache_compression_ratio (\S+)$/m.exec(metrics)?.[1]);
    expect(stored).toBeGreaterThan(0);
    expect(decoded).toBeGreaterThan(stored * 5);
    expect(ratio).toBeCloseTo(decoded / stored, 3);
  });

  it('Octokit, which sends Accept-Encoding, gets gzip (its fetch decodes it)', async () => {
    const octokit = new Octokit({
      baseUrl: proxy.url,
      auth: 'cz_client_alice',
      log: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
    });
    const { data } = await octokit.rest.repos.listForOrg({ org: 'etagere-org', per_page: 100 });
    expect(data.length).toBeGreaterThan(10);
    const line = proxy.logs().findLast((entry) => typeof entry.path === 'string' && entry.path.startsWith('/orgs/etagere-org/repos'));
    expect(Number(line?.bytes)).toBeLessThan(JSON.stringify(data).length / 5);
  });

  it('the access line counts bytes on the wire', () => {
    // The first test's three requests: gzip, identity, no Accept-Encoding.
    const lines = proxy.logs().filter((line) => line.path === LIST && line.method === 'GET');
    const sizes = lines.slice(0, 3).map((line) => Number(line.bytes));
    expect(sizes[0]! * 5).toBeLessThan(sizes[1]!);
  });
});

describe('decoded bodies for identity clients count within cache.max_bytes', () => {
  const MAX_BYTES = 200_000;
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ tokens: parseTokenSpec('cz_client_alice@alice:repo') });
    proxy = await startTestProxy({ cache: { max_bytes: MAX_BYTES }, upstreams: [{ name: 'github', prefix: '/', url: fake.url }] });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  const cacheBytes = async (): Promise<{ l1: number; decoded: number }> => {
    const metrics = await (await fetch(`${proxy.adminUrl}/metrics`)).text();
    const tier = (name: string): number => Number(new RegExp(`etagere_cache_bytes\\{tier="${name}"\\} (\\d+)`).exec(metrics)?.[1]);
    return { l1: tier('l1'), decoded: tier('decoded_bodies') };
  };

  it('L1 gives way to the decoded bodies, and a hot entry stays a hit with the same content for both codings', async () => {
    const hot = '/repos/octocat/hello-world?z=hot';
    const first = await send(`${proxy.url}${hot}`, TOKEN);
    expect(first.status).toBe(200);
    for (let i = 0; i < 60; i++) {
      const answer = await send(`${proxy.url}/repos/octocat/hello-world?z=${i}`, TOKEN);
      expect(answer.status).toBe(200);
      expect(answer.headers['content-encoding']).toBeUndefined();
      const again = await send(`${proxy.url}${hot}`, TOKEN);
      expect(again.headers['cache-status']).toMatch(/hit/);
      expect(again.body.equals(first.body)).toBe(true);
      const bytes = await cacheBytes();
      expect(bytes.l1 + bytes.decoded).toBeLessThanOrEqual(MAX_BYTES);
    }
    const { l1, decoded } = await cacheBytes();
    expect(decoded).toBeGreaterThan(0);
    expect(l1).toBeGreaterThan(0);
    const gzip = await send(`${proxy.url}${hot}`, { ...TOKEN, ...GZIP });
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gzip.body).equals(first.body)).toBe(true);
  });
});

describe('compression with body URLs rewritten (token pool)', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ tokens: parseTokenSpec('cz_pool_one@alice:repo') });
    proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
      pool: { tokens: [{ name: 'one', value: 'cz_pool_one' }] },
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('rewrites the decoded body, then gives it back in gzip to a gzip client and as it is to an identity one', async () => {
    const gzip = await send(`${proxy.url}${LIST}`, GZIP);
    const identity = await send(`${proxy.url}${LIST}`, IDENTITY);
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(Number(gzip.headers['content-length'])).toBe(gzip.body.length);
    const decoded = gunzipSync(gzip.body);
    expect(decoded.equals(identity.body)).toBe(true);
    expect(decoded.toString('utf8')).toContain(`"url":"${proxy.url}/repos/`);
    expect(decoded.toString('utf8')).not.toContain(fake.url);
    expect(gzip.headers.etag).toBe(identity.headers.etag);
    const hit = await send(`${proxy.url}${LIST}`, GZIP);
    expect(hit.body.equals(gzip.body)).toBe(true);
    expect(hit.headers['cache-status']).toMatch(/hit/);
  });
});

describe('compression of other upstreams (scripted)', () => {
  const json = Buffer.from(JSON.stringify({ items: Array.from({ length: 200 }, (_, index) => ({ index, name: `item ${index}` })) }));
  /** Over the entry cap even gzipped: streamed, never stored. */
  const large = Buffer.from(JSON.stringify({ noise: randomBytes(150_000).toString('hex') }));
  /** 8 MiB of zeros, a few KiB gzipped: over 32 times the entry cap once decoded. */
  const bomb = gzipSync(Buffer.alloc(8 * 1024 * 1024, 0x20));
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      const gzip = /gzip/.test(String(req.headers['accept-encoding']));
      const noTransform = req.url?.includes('no-transform') === true;
      const headers: Record<string, string> = {
        'content-type': 'application/json; charset=utf-8',
        'cache-control': noTransform ? 'public, max-age=60, no-transform' : 'public, max-age=60',
        etag: '"strong-tag"',
        vary: 'Accept',
      };
      if (gzip) headers['content-encoding'] = 'gzip';
      res.writeHead(200, headers);
      if (req.url?.includes('bomb') === true) res.end(bomb);
      else if (req.url?.includes('large') === true) res.end(gzip ? gzipSync(large) : large);
      else res.end(gzip ? gzipSync(json) : json);
    });
    proxy = await startTestProxy({
      upstreams: [
        { name: 'cached', prefix: '/cached', url: upstream.url },
        { name: 'none', prefix: '/none', url: upstream.url, cache: { policy: 'none' } },
      ],
      cache: { max_entry_bytes: 65_536 },
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  it('asks the upstream for gzip whatever the client takes', async () => {
    await send(`${proxy.url}/cached/ask`, IDENTITY);
    expect(upstream.seen.at(-1)?.headers['accept-encoding']).toBe('gzip');
  });

  it('weakens a strong ETag when it decodes, keeps it when it serves the stored bytes, and adds Vary: Accept-Encoding', async () => {
    const gzip = await send(`${proxy.url}/cached/strong`, GZIP);
    const identity = await send(`${proxy.url}/cached/strong`, IDENTITY);
    expect(gzip.headers.etag).toBe('"strong-tag"');
    expect(identity.headers.etag).toBe('W/"strong-tag"');
    expect(identity.body.equals(json)).toBe(true);
    expect(gunzipSync(gzip.body).equals(json)).toBe(true);
    for (const answer of [gzip, identity]) expect(String(answer.headers.vary)).toMatch(/Accept-Encoding/i);
    const revalidated = await send(`${proxy.url}/cached/strong`, { ...IDENTITY, 'if-none-match': 'W/"strong-tag"' });
    expect(revalidated.status).toBe(304);
    expect(revalidated.headers.etag).toBe('W/"strong-tag"');
  });

  it('honours no-transform: the stored coding goes out unchanged, ETag and all, to clients that take it or sent no Accept-Encoding', async () => {
    for (const headers of [GZIP, {}]) {
      const answer = await send(`${proxy.url}/cached/no-transform`, headers);
      expect(answer.headers['content-encoding']).toBe('gzip');
      expect(answer.headers.etag).toBe('"strong-tag"');
      expect(String(answer.headers.vary)).toMatch(/Accept-Encoding/i);
      expect(gunzipSync(answer.body).equals(json)).toBe(true);
    }
  });

  it('forwards a client that refused gzip with its own Accept-Encoding, uncached, and keeps the gzip entry', async () => {
    await send(`${proxy.url}/cached/no-transform`, GZIP);
    const before = upstream.seen.length;
    const identity = await send(`${proxy.url}/cached/no-transform`, IDENTITY);
    expect(upstream.seen.length - before).toBe(1);
    expect(upstream.seen.at(-1)?.headers['accept-encoding']).toBe('identity');
    expect(identity.status).toBe(200);
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.headers.etag).toBe('"strong-tag"'); // the origin's own, for its own representation
    expect(identity.headers['cache-status']).toBe('etagere; fwd=vary-miss; fwd-status=200; detail=coding');
    expect(identity.body.equals(json)).toBe(true);
    const hit = await send(`${proxy.url}/cached/no-transform`, GZIP);
    expect(hit.headers['cache-status']).toMatch(/; hit/);
    expect(hit.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(hit.body).equals(json)).toBe(true);
    expect(upstream.seen.length - before).toBe(1);
  });

  it('forwards a refusing client of a no-transform gzip body over the entry cap rather than stream the gzip it refused', async () => {
    const before = upstream.seen.length;
    const identity = await send(`${proxy.url}/cached/large-no-transform`, IDENTITY);
    expect(upstream.seen.slice(before).map((seen) => seen.headers['accept-encoding'])).toEqual(['gzip', 'identity']);
    expect(identity.status).toBe(200);
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.headers['cache-status']).toMatch(/fwd=vary-miss; fwd-status=200; detail=coding/);
    expect(identity.body.equals(large)).toBe(true);
    const gzip = await send(`${proxy.url}/cached/large-no-transform`, GZIP);
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gzip.headers['cache-status']).toMatch(/detail=too-large/);
    expect(gunzipSync(gzip.body).equals(large)).toBe(true);
  });

  it('refuses a gzip bomb (more than 32 times the entry cap decoded) with a 502, and stores nothing', async () => {
    const before = upstream.seen.length;
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const answer = await send(`${proxy.url}/cached/bomb`, GZIP);
      expect(answer.status).toBe(502);
      expect(JSON.parse(answer.body.toString('utf8'))).toHaveProperty('message');
    }
    expect(upstream.seen.length - before).toBe(2);
  });

  it('decodes a body over the entry cap on the way for a client that does not take gzip', async () => {
    const identity = await send(`${proxy.url}/cached/large`, IDENTITY);
    expect(identity.status).toBe(200);
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.headers.etag).toBe('W/"strong-tag"');
    expect(identity.body.equals(large)).toBe(true);
    const gzip = await send(`${proxy.url}/cached/large`, GZIP);
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gzip.body).equals(large)).toBe(true);
  });

  it('policy none streams the coding the client asked for, unchanged', async () => {
    const gzip = await send(`${proxy.url}/none/x`, GZIP);
    expect(upstream.seen.at(-1)?.headers['accept-encoding']).toBe(GZIP['accept-encoding']);
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gzip.body).equals(json)).toBe(true);
    const identity = await send(`${proxy.url}/none/x`, IDENTITY);
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.body.equals(json)).toBe(true);
  });
});
