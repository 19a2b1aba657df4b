/**
 * Who spends the quota on what: two consumers (keys) on two routes through `etagere serve`, then
 * GET /admin/quota names each consumer x route with its upstream and billable requests, /metrics
 * has the route-labelled per-consumer counters, and `etagere quota` prints the same. With
 * metrics.consumer_label: user_agent, a client cycling User-Agents gets at most 50 labels + other.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { runCli, serveCli, type CliProcess } from '../helpers/cli.js';
import { get } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';
import { deadPort } from '../helpers/upstream.js';

const POOL_TOKEN = testSecret('quota pool token', 'quota_pool_token_7c2e91');
const ALPHA_KEY = testSecret('quota consumer key alpha', 'quota_key_alpha_3b8d1f');
const BETA_KEY = testSecret('quota consumer key beta', 'quota_key_beta_9e4a62');
const REPO = '/repos/octocat/hello-world';
const USER = '/users/octocat';

interface Row {
  consumer: string;
  upstream: string;
  route: string;
  upstream_requests: number;
  billable_requests: number;
}
interface Quota {
  window: string;
  consumer_label: string;
  totals: { upstream_requests: number; billable_requests: number };
  by_upstream_requests: Row[];
  by_billable_requests: Row[];
}

// Route templates are the proxy's own (src/http/route.ts); the tests know only where they start.
const isRepo = (route: string): boolean => route.startsWith('/repos/');
const isUser = (route: string): boolean => route.startsWith('/users/');

describe('GET /admin/quota and etagere quota (etagere serve, two consumer keys)', () => {
  let fake: FakeUpstream;
  let cli: CliProcess;
  let dir: string;
  let url: string;
  let admin: string;

  beforeAll(async () => {
    fake = await startFakeUpstream({ tokens: parseTokenSpec(`${POOL_TOKEN}@alice:public_repo`) });
    dir = mkdtempSync(join(tmpdir(), 'etagere-quota-'));
    const config = join(dir, 'etagere.yaml');
    writeFileSync(
      config,
      [
        'upstreams:',
        `  - { name: github, prefix: /, url: "${fake.url}", token_pool: true }`,
        'consumers:',
        '  enabled: true',
        '  keys:',
        '    - { name: alpha, env: ETAGERE_KEY_ALPHA }',
        '    - { name: beta, env: ETAGERE_KEY_BETA }',
        '',
      ].join('\n'),
    );
    const [port, adminPort] = [await deadPort(), await deadPort()];
    url = `http://127.0.0.1:${port}`;
    admin = `http://127.0.0.1:${adminPort}`;
    cli = runCli(['serve', '--config', config], {
      PORT: String(port),
      HOST: '127.0.0.1',
      ADMIN_PORT: String(adminPort),
      ETAGERE_CONFIG: undefined,
      UPSTREAM_URL: undefined,
      ETAGERE_TOKENS: `pool=${POOL_TOKEN}`,
      ETAGERE_KEY_ALPHA: ALPHA_KEY,
      ETAGERE_KEY_BETA: BETA_KEY,
      LOG_LEVEL: 'warn',
    });
    await until(async () => (await get(`${admin}/readyz`).catch(() => ({ status: 0 }))).status === 200, 20_000, 'the proxy');
    const as = (key: string, path: string, headers: Record<string, string> = {}) =>
      get(`${url}${path}`, { 'x-etagere-key': key, ...headers });
    // alpha: a miss and a hit on the repository, a miss on the user (two billable requests).
    expect((await as(ALPHA_KEY, REPO)).status).toBe(200);
    expect((await as(ALPHA_KEY, REPO)).headers['cache-status']).toMatch(/^etagere; hit/);
    expect((await as(ALPHA_KEY, USER)).status).toBe(200);
    // beta: two forced revalidations of the user (authorised 304s: upstream, not billable), a hit on the repository.
    for (let i = 0; i < 2; i++)
      expect((await as(BETA_KEY, USER, { 'cache-control': 'no-cache' })).headers['cache-status']).toMatch(/fwd-status=304/);
    expect((await as(BETA_KEY, REPO)).headers['cache-status']).toMatch(/^etagere; hit/);
  }, 40_000);
  afterAll(async () => {
    cli?.child.kill('SIGKILL');
    await fake?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  const quota = async (query = ''): Promise<Quota> => {
    const answer = await get(`${admin}/admin/quota${query}`);
    expect(answer.status).toBe(200);
    return JSON.parse(answer.body) as Quota;
  };
  const pick = (rows: Row[], consumer: string, route: (template: string) => boolean): Row | undefined =>
    rows.find((row) => row.consumer === consumer && route(row.route));

  it('names each consumer x route with its upstream and billable requests', async () => {
    const report = await quota();
    expect(report).toMatchObject({ window: '1h', consumer_label: 'key', totals: { upstream_requests: 4, billable_requests: 2 } });
    const rows = report.by_upstream_requests;
    expect(rows).toHaveLength(3);
    expect(pick(rows, 'alpha', isRepo)).toMatchObject({ upstream: 'github', upstream_requests: 1, billable_requests: 1 });
    expect(pick(rows, 'alpha', isUser)).toMatchObject({ upstream_requests: 1, billable_requests: 1 });
    expect(pick(rows, 'beta', isUser)).toMatchObject({ upstream_requests: 2, billable_requests: 0 });
    expect(rows[0]).toBe(pick(rows, 'beta', isUser)); // the busiest first
    expect(pick(rows, 'beta', isRepo)).toBeUndefined(); // hits only
    expect(report.by_billable_requests.map((row) => row.consumer).sort()).toEqual(['alpha', 'alpha']);
    expect((await quota('?window=5m')).totals).toEqual(report.totals);
    expect((await quota('?window=24h')).totals).toEqual(report.totals);
    const status = JSON.parse((await get(`${admin}/admin/status`)).body) as { quota: Quota };
    expect(status.quota.by_upstream_requests).toEqual(rows);
    expect(JSON.stringify(report)).not.toContain(ALPHA_KEY);
  });

  it('refuses a bad window with a 400 in GitHub shape', async () => {
    for (const query of ['?window=2d', '?window=1h&window=5m', '?limit=5']) {
      const answer = await get(`${admin}/admin/quota${query}`);
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.body)).toMatchObject({ message: expect.any(String), documentation_url: expect.any(String) });
    }
  });

  it('counts per consumer and route in /metrics', async () => {
    const text = (await get(`${admin}/metrics`)).body;
    const series = (name: string): Array<{ consumer: string; route: string; value: number }> =>
      [...text.matchAll(new RegExp(`^${name}\\{consumer="([^"]+)",route="([^"]+)"\\} (\\d+)$`, 'gm'))].map((match) => ({
        consumer: match[1]!,
        route: match[2]!,
        value: Number(match[3]),
      }));
    const value = (name: string, consumer: string, route: (template: string) => boolean) =>
      series(name).find((row) => row.consumer === consumer && route(row.route))?.value;
    expect(value('etagere_consumer_upstream_requests_total', 'alpha', isRepo)).toBe(1);
    expect(value('etagere_consumer_upstream_requests_total', 'alpha', isUser)).toBe(1);
    expect(value('etagere_consumer_upstream_requests_total', 'beta', isUser)).toBe(2);
    expect(value('etagere_consumer_upstream_requests_total', 'beta', isRepo)).toBeUndefined();
    expect(value('etagere_consumer_requests_total', 'alpha', isRepo)).toBe(2);
    expect(value('etagere_consumer_requests_total', 'beta', isRepo)).toBe(1);
    expect(value('etagere_consumer_hits_total', 'alpha', isRepo)).toBe(1);
    expect(value('etagere_consumer_hits_total', 'beta', isRepo)).toBe(1);
    expect(series('etagere_consumer_upstream_requests_total')).toHaveLength(3);
  });

  it('`etagere quota` prints the table, --json the answer, and refuses a bad --window', async () => {
    const table = runCli(['quota', '--admin', admin]);
    expect(await table.exited).toEqual({ code: 0, signal: null });
    expect(table.stdout()).toContain('last 1h (consumer label: key): 4 upstream requests, 2 billable');
    expect(table.stdout()).toMatch(/^beta\s+github\s+\/users\/\S+\s+2\s+0$/m);
    expect(table.stdout()).toMatch(/^alpha\s+github\s+\/repos\/\S+\s+1\s+1$/m);
    const json = runCli(['quota', '--admin', admin, '--window', '5m', '--json']);
    expect(await json.exited).toEqual({ code: 0, signal: null });
    expect(JSON.parse(json.stdout())).toMatchObject({ window: '5m', totals: { upstream_requests: 4 } });
    const bad = runCli(['quota', '--admin', admin, '--window', '2d']);
    expect((await bad.exited).code).toBe(2);
    expect(bad.stderr()).toContain('--window must be one of 5m, 1h, 24h');
    const away = runCli(['quota', '--admin', 'http://127.0.0.1:9']);
    expect((await away.exited).code).toBe(1);
    expect(away.stderr()).toContain('no proxy answers at');
  }, 20_000);
});

describe('metrics.consumer_label: user_agent', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url }],
      metrics: { consumer_label: 'user_agent' },
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('labels by the first product token, at most 50 labels + other however many User-Agents a client cycles', async () => {
    for (let i = 0; i < 3; i++) await get(`${proxy.url}/users/octocat?i=${i}`, { 'user-agent': 'alpha-bot/1.2 (linux)' });
    for (let i = 0; i < 300; i++) await get(`${proxy.url}/users/octocat`, { 'user-agent': `rotating-${i}/1.0` });
    await get(`${proxy.url}/users/octocat`, { 'user-agent': '' });
    const text = (await get(`${proxy.adminUrl}/metrics`)).body;
    const labels = new Set([...text.matchAll(/^etagere_consumer_requests_total\{consumer="([^"]+)"/gm)].map((m) => m[1]!));
    expect(labels.size).toBeLessThanOrEqual(52); // 50 agents, other, unknown
    expect(labels.has('alpha-bot')).toBe(true);
    expect(labels.has('other')).toBe(true);
    const report = JSON.parse((await get(`${proxy.adminUrl}/admin/quota`)).body) as Quota;
    expect(report.consumer_label).toBe('user_agent');
    const alpha = report.by_upstream_requests.find((row) => row.consumer === 'alpha-bot');
    expect(alpha).toMatchObject({ upstream_requests: 3, billable_requests: 3 }); // anonymous requests: no free 304s
    expect(new Set(report.by_upstream_requests.map((row) => row.consumer)).size).toBeLessThanOrEqual(52);
  }, 30_000);
});

describe('GET /admin/quota of a cluster primary (workers: 2)', () => {
  let fake: FakeUpstream;
  let cli: CliProcess;
  let url: string;
  let admin: string;
  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    ({ cli, url, admin } = await serveCli({ UPSTREAM_URL: fake.url, WORKERS: '2', LOG_LEVEL: 'warn' }));
    await until(async () => (await get(`${admin}/readyz`).catch(() => ({ status: 0 }))).status === 200, 30_000, 'both workers');
  }, 40_000);
  afterAll(async () => {
    cli?.child.kill('SIGKILL');
    await fake?.close();
  });

  it("sums the workers' windows; without consumer keys a request has no consumer label", async () => {
    // Distinct paths, one connection each: the kernel spreads them over both workers.
    await Promise.all(Array.from({ length: 20 }, (_, index) => get(`${url}/users/octocat?n=${index}`, { connection: 'close' })));
    const report = JSON.parse((await get(`${admin}/admin/quota?window=5m`)).body) as Quota;
    expect(report.consumer_label).toBe('none');
    expect(report.totals).toEqual({ upstream_requests: 20, billable_requests: 20 });
    expect(report.by_upstream_requests).toEqual([
      { consumer: '-', upstream: 'github', route: expect.stringMatching(/^\/users\//), upstream_requests: 20, billable_requests: 20 },
    ]);
    expect((await get(`${admin}/metrics`)).body).not.toMatch(/^etagere_consumer_requests_total\{/m);
  }, 20_000);
});
