/**
 * Observability against real tools: `promtool check metrics` on a scraped /metrics, and a real
 * Prometheus (Debian package) scraping a proxy with a token pool and Redis under a short load,
 * through which every panel query of grafana/dashboards/etagere.json is evaluated. Both are
 * skipped, saying why, where the `prometheus` package is not installed (.ci/run installs it).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { deadPort } from '../helpers/upstream.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const has = (cmd: string): boolean => spawnSync(cmd, ['--version'], { stdio: 'ignore' }).status === 0;
const PROMETHEUS = has('prometheus') && has('promtool');
if (!PROMETHEUS) {
  process.stderr.write(
    'observability tests skipped: the Debian package "prometheus" (prometheus, promtool) is not installed; apt-get install prometheus\n',
  );
}

const TOKENS = ['obs_pool_token_one1', 'obs_pool_token_two2'];

interface Panel {
  title: string;
  targets: Array<{ expr: string }>;
}

async function text(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const res = await request(url, { headers });
  return { status: res.statusCode, body: await res.body.text() };
}

describe('observability with real Prometheus tools', () => {
  let fake: FakeUpstream;
  let redis: TestRedis;
  let proxy: TestProxy;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({ tokens: parseTokenSpec(TOKENS.map((t, i) => `${t}@u${i}:public_repo`).join(',')), latencyMs: 2 });
    proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
      redis: { url: redis.url, key_prefix: 'obs-test:' },
      pool: { tokens: TOKENS.map((value, i) => ({ name: `tok${i}`, value })) },
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
    await redis?.stop();
  });

  /** A short mixed load: misses, hits, revalidations, 404s, a client's own token. */
  async function load(rounds: number): Promise<void> {
    for (let i = 0; i < rounds; i++) {
      await Promise.all([
        text(`${proxy.url}/repos/octocat/hello-world`),
        text(`${proxy.url}/repos/etagere-org/repo-0${String(10 + (i % 50))}`),
        text(`${proxy.url}/users/octocat`, { 'cache-control': 'no-cache' }),
        text(`${proxy.url}/users/no-such-user-${i % 3}`),
        text(`${proxy.url}/user`, { authorization: 'token demo_token_alice_repo' }),
      ]);
    }
  }

  it('access log lines carry request ids and routes, and never a token value', async () => {
    await load(3);
    const lines = proxy.logs().filter((l) => l.msg === 'request');
    expect(lines.length).toBeGreaterThan(10);
    for (const line of lines) {
      expect(typeof line.reqId).toBe('string');
      expect(String(line.reqId).length).toBeGreaterThan(0);
    }
    expect(lines.some((l) => l.route === '/repos/{owner}/{repo}' && typeof l.tokenName === 'string')).toBe(true);
    for (const secret of [...TOKENS, 'demo_token_alice_repo']) expect(proxy.logText()).not.toContain(secret);
  });

  it("labels the hit path with GitHub's route templates, never the raw paths", async () => {
    await load(2);
    const metrics = (await text(`${proxy.adminUrl}/metrics`)).body;
    expect(metrics).toMatch(/^etagere_cache_outcomes_total\{upstream="github",route="\/repos\/\{owner\}\/\{repo\}",outcome="hit"\} [1-9]/m);
    expect(metrics).toMatch(/^etagere_requests_total\{upstream="github",route="\/users\/\{username\}",method="GET",status="404"\} [1-9]/m);
    expect(metrics).toMatch(/^etagere_requests_total\{upstream="github",route="\/user",method="GET",status="\d+"\} [1-9]/m);
    expect(metrics).not.toMatch(/route="[^"]*(octocat|etagere-org|no-such-user)/);
  });

  it.skipIf(!PROMETHEUS)('`promtool check metrics` accepts the scraped /metrics', async () => {
    await load(2);
    const metrics = await text(`${proxy.adminUrl}/metrics`);
    const check = spawnSync('promtool', ['check', 'metrics'], { input: metrics.body, encoding: 'utf8' });
    expect(check.stdout + check.stderr).toBe('');
    expect(check.status).toBe(0);
    // Route labels are templates, never raw paths; token labels are names, never values.
    expect(metrics.body).toContain('route="/repos/{owner}/{repo}"');
    expect(metrics.body).not.toMatch(/route="\/repos\/octocat/);
    for (const secret of TOKENS) expect(metrics.body).not.toContain(secret);
  });

  it.skipIf(!PROMETHEUS)(
    'every dashboard panel query returns series from a real Prometheus',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'etagere-prometheus-'));
      const port = await deadPort();
      const admin = new URL(proxy.adminUrl);
      writeFileSync(
        join(dir, 'prometheus.yml'),
        `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: etagere\n    static_configs:\n      - targets: ['${admin.host}']\n`,
      );
      let prom: ChildProcess | undefined;
      let output = '';
      try {
        prom = spawn(
          'prometheus',
          [
            `--config.file=${join(dir, 'prometheus.yml')}`,
            `--storage.tsdb.path=${join(dir, 'data')}`,
            `--web.listen-address=127.0.0.1:${port}`,
          ],
          {
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        );
        prom.stdout!.on('data', (d: Buffer) => (output += d.toString()));
        prom.stderr!.on('data', (d: Buffer) => (output += d.toString()));
        const api = `http://127.0.0.1:${port}/api/v1`;
        const query = async (expr: string): Promise<{ status: string; error?: string; data?: { result: unknown[] } }> => {
          const res = await request(`${api}/query?query=${encodeURIComponent(expr)}`);
          return (await res.body.json()) as { status: string; error?: string; data?: { result: unknown[] } };
        };
        await until(
          async () =>
            text(`${api}/status/buildinfo`).then(
              (r) => r.status === 200,
              () => false,
            ),
          15_000,
          `prometheus to start:\n${output}`,
        );
        // Load while Prometheus scrapes every second, until it holds a few scrapes of it.
        const deadline = Date.now() + 20_000;
        for (;;) {
          await load(3);
          const scrapes = await query('count_over_time(up{job="etagere"}[1m])');
          const scrapeCount = Number((scrapes.data?.result[0] as { value?: [number, string] } | undefined)?.value?.[1] ?? 0);
          if (scrapeCount >= 4) break;
          if (Date.now() > deadline) throw new Error(`prometheus scraped etagere only ${scrapeCount} times:\n${output}`);
        }
        await load(3);
        await until(
          async () =>
            Number(((await query('count_over_time(up{job="etagere"}[1m])')).data?.result[0] as { value: [number, string] }).value[1]) >= 6,
          10_000,
          'two more scrapes',
        );

        const dashboard = JSON.parse(readFileSync(join(ROOT, 'grafana/dashboards/etagere.json'), 'utf8')) as { panels: Panel[] };
        const failures: string[] = [];
        let evaluated = 0;
        for (const panel of dashboard.panels) {
          for (const target of panel.targets) {
            // Grafana's $__rate_interval is resolved by Grafana; here a minute covers the test's scrapes.
            const expr = target.expr.replaceAll('$__rate_interval', '1m');
            const answer = await query(expr);
            evaluated++;
            if (answer.status !== 'success') failures.push(`${panel.title}: ${expr}: ${answer.error ?? 'error'}`);
            else if ((answer.data?.result.length ?? 0) === 0) failures.push(`${panel.title}: ${expr}: no series`);
          }
        }
        expect(evaluated).toBeGreaterThanOrEqual(20);
        expect(failures).toEqual([]);
      } finally {
        prom?.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
