/**
 * `Cache-Control: no-transform` and clients that refuse gzip. The
 * proxy may not decode such an entry (RFC 9110 section 7.7), so a client that explicitly refused
 * its coding has its own request forwarded, with its own Accept-Encoding, on the pool's rules, and
 * gets the origin's answer uncached. Gzip clients and clients without Accept-Encoding (which take
 * any coding) keep getting the stored entry, which the forwarded answers never replace.
 */
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { sendRaw as send } from '../helpers/raw-request.js';

const KEY = { 'x-etagere-key': 'nt-consumer-key-1' };
const GZIP = { ...KEY, 'accept-encoding': 'gzip, deflate, br' };
const IDENTITY = { ...KEY, 'accept-encoding': 'identity' };

describe('no-transform entries and clients that refuse gzip (fake upstream, token pool, consumer keys)', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ tokens: parseTokenSpec('nt_pool_one@alice:repo,nt_pool_two@bob:repo'), noTransform: true });
    proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
      pool: {
        tokens: [
          { name: 'one', value: 'nt_pool_one' },
          { name: 'two', value: 'nt_pool_two' },
        ],
      },
      consumers: { enabled: true, keys: [{ name: 'web', value: KEY['x-etagere-key'] }] },
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  const consumer = async (): Promise<Record<string, unknown>> => {
    const report = (await (await fetch(`${proxy.adminUrl}/admin/consumers`)).json()) as { consumers: Array<{ name: string }> };
    return report.consumers.find((entry) => entry.name === 'web')!;
  };

  it('forwards an identity client with its own Accept-Encoding and streams identity bytes; gzip clients keep the stored entry', async () => {
    const path = '/repos/octocat/hello-world';
    const gzip = await send(`${proxy.url}${path}`, GZIP);
    expect(gzip.status).toBe(200);
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gzip.headers['cache-control']).toMatch(/no-transform/);
    expect(String(gzip.headers.vary)).toMatch(/Accept-Encoding/i);
    const before = fake.stats().total;

    const identity = await send(`${proxy.url}${path}`, IDENTITY);
    expect(fake.stats().total - before).toBe(1); // the upstream saw the identity client's own request
    expect(identity.status).toBe(200);
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.body.equals(gunzipSync(gzip.body))).toBe(true); // body URLs untouched too: no-transform
    expect(identity.headers['cache-status']).toBe('etagere; fwd=vary-miss; fwd-status=200; detail=coding');
    expect(identity.headers['x-ratelimit-limit']).toBeDefined(); // the pool's headers, as on any pooled answer
    expect(await consumer()).toMatchObject({ requests: 2, upstream_requests: 2, hits: 0 });
    // On a pool token, the one that fetched the entry (its ETag is that credential's), as a revalidation would prefer.
    const lines = proxy.logs().filter((entry) => entry.path === path);
    expect(lines.map((entry) => entry.cache)).toEqual(['miss', 'bypass']);
    expect(lines[1]?.tokenName).toMatch(/^(one|two)$/);
    expect(lines[1]?.tokenName).toBe(lines[0]?.tokenName);

    // The entry is still the gzip one, served from cache to a gzip client and to one without Accept-Encoding.
    const hit = await send(`${proxy.url}${path}`, GZIP);
    const none = await send(`${proxy.url}${path}`, KEY);
    expect(fake.stats().total - before).toBe(1);
    for (const answer of [hit, none]) {
      expect(answer.headers['cache-status']).toMatch(/; hit/);
      expect(answer.headers['content-encoding']).toBe('gzip');
      expect(answer.body.equals(gzip.body)).toBe(true);
    }
  });

  it('an identity miss stores the gzip entry for the others and forwards its own request', async () => {
    const path = '/users/octocat';
    const before = fake.stats().total;
    const identity = await send(`${proxy.url}${path}`, IDENTITY);
    expect(identity.status).toBe(200);
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(identity.body.toString('utf8'))).toHaveProperty('login', 'octocat');
    expect(fake.stats().total - before).toBe(2);
    const gzip = await send(`${proxy.url}${path}`, GZIP);
    expect(gzip.headers['cache-status']).toMatch(/; hit/);
    expect(gunzipSync(gzip.body).equals(identity.body)).toBe(true);
    expect(fake.stats().total - before).toBe(2);
  });

  it('hostile and odd Accept-Encoding values never crash and never get the gzip they refused', async () => {
    const path = '/orgs/etagere-org/repos?per_page=5';
    await send(`${proxy.url}${path}`, GZIP);
    const refusals = [
      'gzip;q=0, identity;q=0',
      'identity',
      '*;q=0',
      'br',
      '',
      ';;;,,,==',
      'gzip;q=lots',
      'GZIP;Q=0',
      'gzip;q=-1, *;q=0',
      `${'x-junk;q=1, '.repeat(600)}gzip;q=0`,
    ];
    for (const value of refusals) {
      const answer = await send(`${proxy.url}${path}`, { ...KEY, 'accept-encoding': value });
      expect(answer.status, value).toBe(200);
      expect(answer.headers['content-encoding'], value).toBeUndefined();
      expect(answer.headers['cache-status'], value).toMatch(/detail=coding/);
      expect((JSON.parse(answer.body.toString('utf8')) as unknown[]).length, value).toBe(5);
    }
    // Forms that take gzip are served from the entry.
    for (const value of ['*', 'x-gzip;q=0, gzip;q=0.1', 'br, gzip']) {
      const answer = await send(`${proxy.url}${path}`, { ...KEY, 'accept-encoding': value });
      expect(answer.headers['cache-status'], value).toMatch(/; hit/);
      expect(answer.headers['content-encoding'], value).toBe('gzip');
    }
  });

  it('HEAD and If-None-Match from a refusing client are forwarded too: the origin validates its own representation', async () => {
    const path = '/repos/octocat/spoon-knife';
    const full = await send(`${proxy.url}${path}`, GZIP);
    const plain = await send(`${proxy.url}${path}`, IDENTITY);
    const before = fake.stats().total;
    const head = await send(`${proxy.url}${path}`, IDENTITY, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers['content-encoding']).toBeUndefined();
    expect(head.headers['content-length']).toBe(String(plain.body.length));
    expect(head.body.length).toBe(0);
    const gzipHead = await send(`${proxy.url}${path}`, GZIP, 'HEAD');
    expect(gzipHead.headers['content-encoding']).toBe('gzip');
    expect(gzipHead.headers['cache-status']).toMatch(/; hit/);
    expect(fake.stats().total - before).toBe(1);

    const again = await send(`${proxy.url}${path}`, { ...IDENTITY, 'if-none-match': String(full.headers.etag) });
    expect(fake.stats().total - before).toBe(2);
    expect(again.status).toBe(304);
    expect(again.headers['content-encoding']).toBeUndefined();
    expect(again.headers['cache-status']).toBe('etagere; fwd=vary-miss; fwd-status=304; detail=coding');
    expect(again.body.length).toBe(0);
  });

  it('only-if-cached from a refusing client is a 504, and nothing goes upstream', async () => {
    const path = '/repos/octocat/hello-world';
    await send(`${proxy.url}${path}`, GZIP);
    const before = fake.stats().total;
    const answer = await send(`${proxy.url}${path}`, { ...IDENTITY, 'cache-control': 'only-if-cached' });
    expect(answer.status).toBe(504);
    expect(answer.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(answer.body.toString('utf8'))).toHaveProperty('documentation_url');
    expect(fake.stats().total - before).toBe(0);
  });
});
