/**
 * GitHub App installations with the real CLI: `etagere serve` with ETAGERE_APP_ID,
 * ETAGERE_APP_PRIVATE_KEY_FILE (a key generated at test time into a temporary directory) and
 * ETAGERE_APP_INSTALLATIONS=all, in front of a spawned `etagere fake-upstream --app ...` under
 * Enterprise Server's base path (/api/v3): pooled requests go out on both installations' tokens.
 * With `workers: 2` and no Redis the primary alone mints and the workers lease its members over
 * IPC; with Redis each worker mints its own. No output holds a token, a JWT or the key.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testAppKeys } from '../helpers/apps.js';
import { runCli, serveCli, type CliProcess, type ServedCli } from '../helpers/cli.js';
import { get, missBurst } from '../helpers/http.js';
import { until } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const APP_ID = 88001;
const keys = testAppKeys('integration/app-pool-cli');

describe('etagere serve with a GitHub App (ETAGERE_APP_*)', () => {
  let dir: string;
  let fake: CliProcess;
  let fakeUrl: string;
  let redis: TestRedis | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'etagere-app-cli-'));
    writeFileSync(join(dir, 'app.pem'), keys.privateKey, { mode: 0o600 });
    writeFileSync(join(dir, 'app.pub.pem'), keys.publicKey);
    const spec = `${APP_ID}/ci-app:${join(dir, 'app.pub.pem')}:1001@etagere-org+1002@alice`;
    fake = runCli(['fake-upstream', '--port', '0', '--base-path', '/api/v3', '--token-limit', '100000', '--app', spec]);
    await until(() => /listening on (http:\/\/\S+)/.test(fake.stdout()), 15_000, 'the fake to listen');
    fakeUrl = /listening on (http:\/\/\S+)/.exec(fake.stdout())![1]!;
  });
  afterAll(async () => {
    fake?.child.kill('SIGTERM');
    await fake?.exited;
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const byInstallation = async (): Promise<Record<string, number>> =>
    (JSON.parse((await get(`${fakeUrl}/__fake/stats`)).body) as { byInstallation: Record<string, number> }).byInstallation;

  async function serve(env: Record<string, string>): Promise<ServedCli> {
    const served = await serveCli({
      UPSTREAM_URL: `${fakeUrl}/api/v3`,
      ETAGERE_TOKENS: undefined,
      ETAGERE_TOKENS_FILE: undefined,
      ETAGERE_APP_ID: String(APP_ID),
      ETAGERE_APP_PRIVATE_KEY_FILE: join(dir, 'app.pem'),
      ETAGERE_APP_INSTALLATIONS: 'all',
      LOG_LEVEL: 'info',
      ...env,
    });
    try {
      await until(
        async () => (await get(`${served.admin}/readyz`).catch(() => ({ status: 0 }))).status === 200,
        30_000,
        'the proxy to be ready',
      );
    } catch (err) {
      served.cli.child.kill('SIGKILL');
      throw err;
    }
    return served;
  }

  /** Serves pooled requests on both installations; returns the process's output once it stopped. */
  async function servesOnBoth(label: string, env: Record<string, string>): Promise<string> {
    const proxy = await serve(env);
    try {
      const rows = (JSON.parse((await get(`${proxy.admin}/admin/tokens`)).body) as { tokens: Array<{ name: string }> }).tokens;
      expect(rows.map((row) => row.name)).toEqual(['app-1001', 'app-1002']);
      const before = await byInstallation();
      expect(await missBurst(proxy.url, label)).toEqual([]);
      const after = await byInstallation();
      for (const id of ['1001', '1002']) expect(after[id] ?? 0).toBeGreaterThan(before[id] ?? 0);
      const metrics = (await get(`${proxy.admin}/metrics`)).body;
      expect(metrics).toContain('etagere_app_installations{app="app"} 2');
    } finally {
      proxy.cli.child.kill('SIGTERM');
    }
    expect((await proxy.cli.exited).code).toBe(0);
    const output = `${proxy.cli.stdout()}${proxy.cli.stderr()}`;
    expect(output).not.toMatch(/ghs_|eyJ|BEGIN/);
    for (const line of keys.secretLines) expect(output).not.toContain(line);
    expect(output).toContain('"pool":"GitHub App app (all installations)"');
    return output;
  }

  const mintedLines = (output: string): number => (output.match(/"msg":"installation token minted"/g) ?? []).length;

  it('one process: the App installations serve pooled requests under the base path', async () => {
    expect(mintedLines(await servesOnBoth('single', {}))).toBe(2);
  }, 60_000);

  it('workers: 2 without Redis: the primary alone mints, the workers use its members', async () => {
    expect(mintedLines(await servesOnBoth('workers', { WORKERS: '2' }))).toBe(2);
  }, 90_000);

  it('workers: 2 with Redis: each worker mints its own tokens of the installations, whose budgets are shared', async () => {
    redis = await startRedis();
    const config = join(dir, 'redis.yaml');
    writeFileSync(config, `redis:\n  key_prefix: "app-cli-${Date.now()}:"\n`);
    expect(mintedLines(await servesOnBoth('redis', { WORKERS: '2', REDIS_URL: redis.url, ETAGERE_CONFIG: config }))).toBe(4);
  }, 90_000);
});
