/**
 * Attacks on the token pool, against the fake GitHub API with healthy tokens:
 *
 * 1. A 401 is about the request before it is about the token. GitHub answers 401 to a normal
 *    token on App-only endpoints (`GET /app`, `GET /repos/{o}/{r}/installation`). Such a request
 *    must not kill pool tokens: the 401 is confirmed with `GET /rate_limit` for that token first
 *    (at most one probe per token per minute), passed to the client as it is, never retried on
 *    other tokens and never cached. A token the upstream really revoked is confirmed dead, and a
 *    dead token that answers again comes back.
 * 2. Every rate-limit resource has its own budget. Spending the search budget (30 a minute per
 *    token on GitHub) must not stop core requests; pooled consumers see their request's resource
 *    in x-ratelimit-*, GET /rate_limit sums every resource, /admin/tokens and /metrics show them.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { get, post, type Answer } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';

const TOKENS = {
  a: testSecret('pool-attacks token a', 'attack_pool_token_a_4f1c'),
  b: testSecret('pool-attacks token b', 'attack_pool_token_b_9d2e'),
  c: testSecret('pool-attacks token c', 'attack_pool_token_c_7a3b'),
};
const FAKE_TOKENS = parseTokenSpec(`${TOKENS.a}@alice:public_repo,${TOKENS.b}@bob:public_repo,${TOKENS.c}@carol:public_repo`);
const POOL = [
  { name: 'a', value: TOKENS.a },
  { name: 'b', value: TOKENS.b },
  { name: 'c', value: TOKENS.c },
];

interface ResourceRow {
  limit: number;
  remaining: number;
  used: number;
  reset: number;
}
interface TokenRow {
  name: string;
  state: string;
  remaining: number | null;
  last_error: string | null;
  resources?: Record<string, ResourceRow>;
}

async function tokens(proxy: TestProxy): Promise<TokenRow[]> {
  return (JSON.parse((await get(`${proxy.adminUrl}/admin/tokens`)).body) as { tokens: TokenRow[] }).tokens;
}

const proxies: TestProxy[] = [];
const fakes: FakeUpstream[] = [];
const servers: Server[] = [];

async function fakeWith(opts: Parameters<typeof startFakeUpstream>[0] = {}): Promise<FakeUpstream> {
  const fake = await startFakeUpstream({ tokens: FAKE_TOKENS, ...opts });
  fakes.push(fake);
  return fake;
}

async function proxyFor(url: string, pool: Record<string, unknown> = {}): Promise<TestProxy> {
  const proxy = await startTestProxy({
    upstreams: [{ name: 'github', prefix: '/', url, token_pool: true, cache: { policy: 'max-age' } }],
    pool: { tokens: POOL, ...pool },
  });
  proxies.push(proxy);
  return proxy;
}

afterEach(async () => {
  for (const proxy of proxies.splice(0)) {
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    const admin = (await get(`${proxy.adminUrl}/admin/tokens`)).body;
    await proxy.close();
    for (const secret of Object.values(TOKENS)) {
      expect(proxy.logText()).not.toContain(secret);
      expect(metrics).not.toContain(secret);
      expect(admin).not.toContain(secret);
    }
  }
  for (const fake of fakes.splice(0)) await fake.close();
  for (const server of servers.splice(0)) await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('a 401 is about the request before it is about the token', () => {
  it('a 401 from an App-only endpoint kills no pool token: passed through as is, not retried, not cached', async () => {
    const fake = await fakeWith();
    const proxy = await proxyFor(fake.url);
    const before = fake.stats();
    const app = await get(`${proxy.url}/app`);
    expect(app.status).toBe(401);
    expect(JSON.parse(app.body)).toMatchObject({ message: 'A JSON web token could not be decoded' });
    // Not retried on the other tokens: one /app request reached the upstream, plus one free probe.
    const after = fake.stats();
    expect((after.byPath['/app'] ?? 0) - (before.byPath['/app'] ?? 0)).toBe(1);
    expect((after.byPath['/rate_limit'] ?? 0) - (before.byPath['/rate_limit'] ?? 0)).toBeLessThanOrEqual(1);
    expect((await tokens(proxy)).map((t) => t.state)).toEqual(['ok', 'ok', 'ok']);

    // The same for the other App-only endpoint, and never cached: each asks the upstream again.
    for (let i = 0; i < 3; i++) expect((await get(`${proxy.url}/repos/octocat/hello-world/installation`)).status).toBe(401);
    expect(fake.stats().byPath['/repos/octocat/hello-world/installation']).toBe(3);
    expect((await tokens(proxy)).map((t) => t.state)).toEqual(['ok', 'ok', 'ok']);

    // Every later request is served (not a 503 with every token dead).
    const repo = await get(`${proxy.url}/repos/octocat/hello-world`);
    expect(repo.status).toBe(200);
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(metrics).not.toMatch(/etagere_token_events_total\{token="[abc]",event="dead"\} [1-9]/);
  });

  it('hostile: a path that keeps answering 401 costs at most one /rate_limit probe per token per minute', async () => {
    const fake = await fakeWith();
    const proxy = await proxyFor(fake.url);
    const probesBefore = fake.stats().byPath['/rate_limit'] ?? 0;
    for (let round = 0; round < 10; round++) {
      const burst = await Promise.all(Array.from({ length: 6 }, (_, i) => get(`${proxy.url}/app?round=${round}&i=${i}`)));
      expect(burst.every((answer) => answer.status === 401)).toBe(true);
    }
    const stats = fake.stats();
    expect(stats.byPath['/app']).toBe(60); // each request once: no retries on other tokens
    expect((stats.byPath['/rate_limit'] ?? 0) - probesBefore).toBeLessThanOrEqual(POOL.length);
    expect((await tokens(proxy)).map((t) => t.state)).toEqual(['ok', 'ok', 'ok']);
    expect((await get(`${proxy.url}/users/octocat`)).status).toBe(200);
  });

  it('a token the upstream revoked is confirmed dead and the request retried; restored, it comes back', async () => {
    const fake = await fakeWith();
    const proxy = await proxyFor(fake.url, { revive_interval_ms: 200 });
    // App-only 401s first: their "the token is fine" must not hide a revocation that follows.
    for (let i = 0; i < 6; i++) expect((await get(`${proxy.url}/app?i=${i}`)).status).toBe(401);
    await post(`${fake.url}/__fake/tokens`, { token: TOKENS.a, revoked: true });
    // Every answer succeeds: a request that meets the revoked token is retried once its 401 is confirmed.
    for (let i = 0; i < 6; i++) expect((await get(`${proxy.url}/users/octocat?i=${i}`)).status).toBe(200);
    await until(async () => (await tokens(proxy))[0]!.state === 'dead', 5_000, 'token a to be confirmed dead');
    const dead = (await tokens(proxy))[0]!;
    expect(dead.last_error).toMatch(/401/);
    expect((await get(`${proxy.adminUrl}/metrics`)).body).toContain('etagere_token_events_total{token="a",event="dead"} 1');

    await post(`${fake.url}/__fake/tokens`, { token: TOKENS.a, revoked: false });
    await until(async () => (await tokens(proxy))[0]!.state === 'ok', 5_000, 'token a to be revived by the re-probe');
    expect((await get(`${proxy.adminUrl}/metrics`)).body).toContain('etagere_token_events_total{token="a",event="revived"} 1');
    expect(proxy.logs().some((line) => line.tokenName === 'a' && /revived|answers again/.test(String(line.msg)))).toBe(true);
  });
});

describe('every rate-limit resource has its own budget', () => {
  it('spending the search budget leaves core alone: core requests are still served', async () => {
    const fake = await fakeWith({ searchLimit: 2 });
    const proxy = await proxyFor(fake.url);
    // The whole pool's search budget: 3 tokens x 2, each search a new (uncached) query.
    const searches: Answer[] = [];
    for (let i = 0; i < 6; i++) searches.push(await get(`${proxy.url}/search/repositories?q=repo&n=${i}`));
    expect(searches.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const last = searches.at(-1)!;
    expect(last.headers['x-ratelimit-resource']).toBe('search');
    expect(last.headers['x-ratelimit-limit']).toBe('6');
    expect(last.headers['x-ratelimit-remaining']).toBe('0');

    // The 7th search: the pool's search budget is spent, answered by the proxy for at most a minute.
    const seventh = await get(`${proxy.url}/search/repositories?q=repo&n=7`);
    expect(seventh.status).toBe(429);
    expect(Number(seventh.headers['retry-after'])).toBeLessThanOrEqual(62);
    expect(seventh.headers['x-ratelimit-resource']).toBe('search');

    // Core is another budget (not a 429 with Retry-After up to 3600, every token spent).
    const core = await get(`${proxy.url}/repos/octocat/hello-world`);
    expect(core.status).toBe(200);
    expect(core.headers['x-ratelimit-resource']).toBe('core');
    expect(core.headers['x-ratelimit-limit']).toBe('15000');
    expect(fake.stats().byStatus['403']).toBeUndefined();
    expect((await tokens(proxy)).map((t) => t.state)).toEqual(['ok', 'ok', 'ok']);
  });

  it('an upstream 403 for search (remaining 0) pauses only search, even when the proxy did not expect it', async () => {
    const fake = await fakeWith({ searchLimit: 1 });
    const proxy = await proxyFor(fake.url, { probe_at_start: false });
    // Spend every token's search budget behind the proxy's back: its first searches meet 403s.
    for (const token of Object.values(TOKENS)) {
      const res = await request(`${fake.url}/search/users?q=a`, { headers: { authorization: `token ${token}` } });
      await res.body.dump();
    }
    const searches = await Promise.all(Array.from({ length: 4 }, (_, i) => get(`${proxy.url}/search/users?q=o&n=${i}`)));
    for (const answer of searches) expect([403, 429]).toContain(answer.status);
    const core = await Promise.all(Array.from({ length: 6 }, (_, i) => get(`${proxy.url}/users/octocat?n=${i}`)));
    expect(core.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(core.every((answer) => answer.headers['x-ratelimit-resource'] === 'core')).toBe(true);
  });

  it('GET /rate_limit sums every resource over the pool; /admin/tokens and /metrics show them', async () => {
    const fake = await fakeWith({ searchLimit: 30, codeSearchLimit: 10 });
    const proxy = await proxyFor(fake.url);
    expect((await get(`${proxy.url}/search/code?q=x`)).status).toBe(200);
    const body = JSON.parse((await get(`${proxy.url}/rate_limit`)).body) as {
      resources: Record<string, ResourceRow & { resource: string }>;
    };
    expect(body.resources.core).toMatchObject({ limit: 15000, resource: 'core' });
    expect(body.resources.search).toMatchObject({ limit: 90, remaining: 90, resource: 'search' });
    expect(body.resources.code_search).toMatchObject({ limit: 30, remaining: 29, used: 1, resource: 'code_search' });
    expect(body.resources.graphql).toMatchObject({ limit: 15000, resource: 'graphql' });
    expect(Object.keys(body.resources)).toEqual(expect.arrayContaining(['integration_manifest', 'audit_log', 'source_import']));

    const rows = await tokens(proxy);
    for (const row of rows) {
      expect(row.resources?.search).toMatchObject({ limit: 30, remaining: 30 });
      expect(row.resources?.core).toMatchObject({ limit: 5000 });
    }
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(metrics).toMatch(/etagere_token_resource_remaining\{token="a",resource="search"\} 30/);
    expect(metrics).toMatch(/etagere_token_resource_limit\{token="a",resource="code_search"\} 10/);
  });

  it('hostile: an upstream that names made-up resources adds no budget, no label and no crash', async () => {
    let count = 0;
    const server = createServer((req, res) => {
      count++;
      const resource = req.url?.startsWith('/rate_limit') ? 'core' : `evil-${count}-${'x'.repeat(200)}"\n`.replace(/\n/g, '');
      res.writeHead(200, {
        'content-type': 'application/json',
        'cache-control': 'no-store',
        'x-ratelimit-limit': '5000',
        'x-ratelimit-remaining': '4000',
        'x-ratelimit-reset': String(Math.ceil(Date.now() / 1000) + 600),
        'x-ratelimit-resource': resource,
      });
      res.end('{"ok":true}');
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const proxy = await proxyFor(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { probe_at_start: false });
    for (let i = 0; i < 40; i++) expect((await get(`${proxy.url}/users/u${i}`)).status).toBe(200);
    for (const row of await tokens(proxy)) {
      for (const name of Object.keys(row.resources ?? {})) expect(name).toMatch(/^[a-z_]+$/);
    }
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(metrics).not.toContain('evil-');
  });
});
