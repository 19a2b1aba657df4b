/**
 * The all-on hit: a pool consumer's request with its X-Etagere-Key among other headers
 * (as real clients send it, not last). The key and the headers a pool request does not forward are
 * set to undefined in the request's header map rather than deleted (src/http/headers/hop-by-hop.ts,
 * `HeaderRemoval`): none of them may reach the upstream, a wrong key is still refused, the
 * per-consumer counters (number cells now) count as before, and a pooled hit's headers are the
 * same list, in the same order, as before.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveSecrets } from '../../src/platform/config/load.js';
import { get } from '../helpers/http.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { counterSum } from '../helpers/metrics-text.js';

const POOL_TOKEN = testSecret('consumer-hit pool token', 'consumer_hit_pool_token_4e1d7b');
const KEY = testSecret('consumer-hit consumer key', 'consumer_hit_key_web_9a3f2c');
const RESET = Math.floor(Date.now() / 1000) + 3600;

let upstream: ScriptedUpstream | undefined;
let proxy: TestProxy | undefined;
afterAll(async () => {
  await proxy?.close();
  await upstream?.close();
});

async function setUp(): Promise<{ proxy: TestProxy; upstream: ScriptedUpstream }> {
  if (proxy !== undefined && upstream !== undefined) return { proxy, upstream };
  upstream = await startScriptedUpstream((req, res) => {
    const limits = {
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': '4990',
      'x-ratelimit-used': '10',
      'x-ratelimit-reset': String(RESET),
    };
    if (req.url === '/rate_limit') {
      const core = { limit: 5000, remaining: 4990, used: 10, reset: RESET };
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', ...limits, 'x-ratelimit-resource': 'core' });
      res.end(JSON.stringify({ resources: { core }, rate: core }));
      return;
    }
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'public, max-age=60',
      etag: '"consumer-hit-v1"',
      ...limits,
      'x-ratelimit-resource': 'core',
    });
    res.end(JSON.stringify({ path: req.url }));
  });
  proxy = await startTestProxy(
    resolveSecrets(
      {
        upstreams: [{ name: 'github', prefix: '/', url: upstream.url, token_pool: true, cache: { policy: 'max-age' } }],
        pool: { tokens: [{ name: 'a', value: POOL_TOKEN }] },
        consumers: { enabled: true, keys: [{ name: 'web', value: KEY }] },
      },
      {},
    ),
  );
  return { proxy, upstream };
}

/** A GET with headers in this exact order; its raw response header list. */
function rawGet(url: string, headers: Array<[string, string]>): Promise<{ status: number; raw: string[]; body: string }> {
  return new Promise((resolve, reject) => {
    // A header list (not an object) keeps their order on the wire; Node then adds no Host of its own.
    const list = [['Host', new URL(url).host], ...headers].flat();
    const req = httpRequest(url, { headers: list as unknown as Record<string, string> }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, raw: res.rawHeaders, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const namesOf = (raw: string[]): string[] => raw.filter((_, index) => index % 2 === 0).map((name) => name.toLowerCase());

/** A consumer's headers with the key in the middle, and headers a pool request does not forward after it. */
const consumerHeaders = (key: string): Array<[string, string]> => [
  // A representation of its own: GitHub's default JSON would go upstream as no Accept (docs/caching.md).
  ['Accept', 'application/vnd.github.full+json'],
  ['X-Etagere-Key', key],
  ['User-Agent', 'consumer-hit-test'],
  ['Cookie', 'session=not-for-upstream'],
  ['X-Custom', 'not-for-upstream'],
];

describe('a pool consumer whose key is not its last header', () => {
  it('is served from the pool, and nothing but the forwarded headers reaches the upstream', async () => {
    const { proxy, upstream } = await setUp();
    const url = `${proxy.url}/repos/octocat/hello-world`;
    const miss = await rawGet(url, consumerHeaders(KEY));
    expect(miss.status).toBe(200);
    const seen = upstream.seen.filter((request) => request.url === '/repos/octocat/hello-world');
    expect(seen).toHaveLength(1);
    const sent = seen[0]!.headers;
    expect(sent.authorization).toMatch(/^(token|Bearer) /i);
    expect(sent['user-agent']).toBe('consumer-hit-test');
    expect(sent.accept).toBe('application/vnd.github.full+json');
    for (const name of ['x-etagere-key', 'cookie', 'x-custom']) expect(sent[name]).toBeUndefined();
    expect(JSON.stringify(sent)).not.toContain(KEY);
    // One request, no hit yet: the consumer has a requests series and no hits series.
    const before = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(counterSum(before, 'etagere_consumer_requests_total', { consumer: 'web' })).toBe(1);
    expect(counterSum(before, 'etagere_consumer_hits_total', { consumer: 'web' })).toBeUndefined();
  });

  it('hits carry the same header list, in the same order, and the consumer counters count them', async () => {
    const { proxy, upstream } = await setUp();
    const url = `${proxy.url}/repos/octocat/hello-world`;
    const first = await rawGet(url, consumerHeaders(KEY));
    const second = await rawGet(url, consumerHeaders(KEY));
    for (const hit of [first, second]) expect(hit.raw[hit.raw.indexOf('cache-status') + 1]).toMatch(/^etagere; hit/);
    expect(upstream.seen.filter((request) => request.url === '/repos/octocat/hello-world')).toHaveLength(1);
    // prettier-ignore
    expect(namesOf(first.raw)).toEqual([
      'content-type', 'cache-control', 'etag', 'date', 'content-length',
      'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-used', 'x-ratelimit-reset', 'x-ratelimit-resource', 'x-etagere-token',
      'age', 'cache-status', 'x-request-id', 'connection', 'keep-alive',
    ]);
    // Two hits differ only in their per-request values (Age, X-Request-Id); the stored Date is the upstream's.
    const perRequest = new Set(['age', 'x-request-id']);
    const fixed = (raw: string[]): string[] =>
      raw.flatMap((value, index) => (index % 2 === 0 && !perRequest.has(value.toLowerCase()) ? [value, raw[index + 1]!] : []));
    expect(fixed(second.raw)).toEqual(fixed(first.raw));
    expect(second.raw[second.raw.indexOf('x-etagere-token') + 1]).toBe('a');
    expect(second.body).toBe(first.body);
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(counterSum(metrics, 'etagere_consumer_requests_total', { consumer: 'web' })).toBe(3);
    expect(counterSum(metrics, 'etagere_consumer_hits_total', { consumer: 'web' })).toBe(2);
  });

  it('a wrong key among other headers is still refused, with GitHub-shaped JSON, and goes nowhere', async () => {
    const { proxy, upstream } = await setUp();
    const before = upstream.seen.length;
    const refused = await rawGet(`${proxy.url}/repos/octocat/hello-world`, consumerHeaders(`${KEY}x`));
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body)).toMatchObject({
      message: expect.stringMatching(/consumer key/),
      documentation_url: expect.any(String),
    });
    // A key sent as the user of Basic credentials, among other headers: the pool's token goes, not the Basic credentials.
    const basic = `Basic ${Buffer.from(`${KEY}:`).toString('base64')}`;
    const byBasic = await rawGet(`${proxy.url}/repos/octocat/other`, [
      ['Accept', 'application/json'],
      ['Authorization', basic],
      ['User-Agent', 'consumer-hit-test'],
    ]);
    expect(byBasic.status).toBe(200);
    const sent = upstream.seen.slice(before).filter((request) => request.url === '/repos/octocat/other');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.headers.authorization).not.toBe(basic);
    expect(JSON.stringify(sent[0]!.headers)).not.toContain(Buffer.from(`${KEY}:`).toString('base64'));
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(metrics).toContain('etagere_consumer_rejections_total{consumer="-",reason="key"} 1');
    expect(proxy.logText()).not.toContain(KEY);
  });
});
