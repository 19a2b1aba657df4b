/**
 * `workers: 2` (node:cluster) without Redis: two worker processes serve one port, the primary
 * owns the token budget (workers lease over IPC, so the machine never overspends), serves the
 * admin port with metrics summed over the workers, and replaces a worker that dies.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { serveCli, type CliProcess, type ServedCli } from '../helpers/cli.js';
import { until } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const TOKENS = ['workers_tok_a1', 'workers_tok_b2'];

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await request(url);
  return { status: res.statusCode, body: await res.body.text() };
}

/** `etagere serve` with WORKERS=2 and the pool's tokens, against `fake`; resolves once the primary is ready. */
async function startCluster(fake: FakeUpstream, env: Record<string, string> = {}): Promise<ServedCli> {
  const served = await serveCli({
    UPSTREAM_URL: fake.url,
    ETAGERE_TOKENS: TOKENS.map((t, i) => `w${i}=${t}`).join(','),
    WORKERS: '2',
    LOG_LEVEL: 'warn',
    ...env,
  });
  await until(
    async () => (await get(`${served.admin}/readyz`).catch(() => ({ status: 0 }))).status === 200,
    30_000,
    'both workers to listen',
  );
  return served;
}

describe('workers: 2 without Redis', () => {
  let fake: FakeUpstream;
  let cli: CliProcess;
  let url: string;
  let admin: string;

  beforeAll(async () => {
    fake = await startFakeUpstream({
      tokens: parseTokenSpec(TOKENS.map((t, i) => `${t}@u${i}:public_repo`).join(',')),
      tokenLimit: 50,
      windowSeconds: 600,
    });
    ({ cli, url, admin } = await startCluster(fake));
  }, 40_000);
  afterAll(async () => {
    cli?.child.kill('SIGKILL');
    await fake?.close();
  });

  it('spends the pool exactly once across the workers: 100 of 100 units, no upstream 403/429, then 429', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 100; i += 10) {
      statuses.push(
        ...(await Promise.all(Array.from({ length: 10 }, (_, j) => get(`${url}/users/octocat?n=${i + j}`).then((r) => r.status)))),
      );
    }
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect((await get(`${url}/users/octocat?n=101`)).status).toBe(429);
    const stats = fake.stats();
    expect(stats.quotaSpent).toBe(100);
    expect(stats.byStatus['403']).toBeUndefined();
    expect(stats.byStatus['429']).toBeUndefined();
    const tokens = JSON.parse((await get(`${admin}/admin/tokens`)).body) as { tokens: Array<{ remaining: number }> };
    expect(tokens.tokens.map((t) => t.remaining)).toEqual([0, 0]);
  });

  it('serves /metrics summed over the workers', async () => {
    const metrics = (await get(`${admin}/metrics`)).body;
    const total = [...metrics.matchAll(/^etagere_requests_total\{[^}]*route="\/users\/\{username\}"[^}]*\} (\d+)$/gm)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    );
    expect(total).toBe(101);
    expect(metrics).toMatch(/^etagere_token_remaining\{token="w0"\} 0$/m);
    if (spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0) {
      const check = spawnSync('promtool', ['check', 'metrics'], { input: metrics, encoding: 'utf8' });
      expect(check.stdout + check.stderr).toBe('');
    }
  });

  it('replaces a worker that dies, and stops cleanly on SIGTERM', async () => {
    const children = () =>
      spawnSync('pgrep', ['-P', String(cli.child.pid), '-f', 'cli.js'], { encoding: 'utf8' })
        .stdout.trim()
        .split('\n')
        .filter(Boolean);
    await until(() => children().length === 2, 5_000, 'two workers');
    const [victim] = children();
    process.kill(Number(victim), 'SIGKILL');
    await until(() => children().length === 2 && !children().includes(victim!), 15_000, 'a new worker');
    await until(async () => (await get(`${admin}/readyz`)).status === 200, 15_000, 'ready again');
    // Served: from the surviving worker's L1 (200), or by the new one whose L1 is empty while the
    // pool is spent (429). Never a connection error or a 5xx.
    expect([200, 429]).toContain((await get(`${url}/users/octocat?n=1`)).status);
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toEqual({ code: 0, signal: null });
  }, 40_000);
});

describe('workers: 2 with Redis', () => {
  let fake: FakeUpstream;
  let redis: TestRedis;
  let cli: CliProcess;
  let url: string;
  let admin: string;

  let configDir: string;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({
      tokens: parseTokenSpec(TOKENS.map((t, i) => `${t}@u${i}:public_repo`).join(',')),
      tokenLimit: 1000,
      latencyMs: 20,
    });
    // This file is about sharing through Redis, not about giving up on a slow one: on a loaded CI
    // machine a lookup of the burst below can take more than the default 20 ms, and a worker then
    // goes on without Redis (and without the cross-worker lock) by design.
    configDir = mkdtempSync(join(tmpdir(), 'etagere-workers-'));
    const config = join(configDir, 'etagere.yaml');
    writeFileSync(config, 'redis:\n  lookup_timeout_ms: 2000\n  command_timeout_ms: 2000\n');
    ({ cli, url, admin } = await startCluster(fake, { REDIS_URL: redis.url, ETAGERE_CONFIG: config }));
    // Ready does not wait for Redis (redis.required is off): a worker still connecting would serve
    // the burst below without Redis, by design. Wait until every worker reports Redis up.
    await until(
      async () => (JSON.parse((await get(`${admin}/admin/status`)).body) as { redis: { up: boolean } }).redis.up,
      15_000,
      'every worker to reach Redis',
    );
  }, 40_000);
  afterAll(async () => {
    cli?.child.kill('SIGTERM');
    await cli?.exited;
    await fake?.close();
    await redis?.stop();
    if (configDir !== undefined) rmSync(configDir, { recursive: true, force: true });
  });

  it('shares single flight and the budget through Redis; the primary reports them', async () => {
    const before = fake.stats().total;
    const answers = await Promise.all(Array.from({ length: 100 }, () => get(`${url}/repos/octocat/hello-world?cold=1`)));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(fake.stats().total - before).toBe(1);
    await until(
      async () => {
        const status = JSON.parse((await get(`${admin}/admin/status`)).body) as {
          redis: { up: boolean };
          budget: string;
          tokens: unknown[];
        };
        return status.redis.up && status.budget === 'shared' && status.tokens.length === 2;
      },
      5_000,
      'the status to show Redis up and the shared pool',
    );
  });
});
