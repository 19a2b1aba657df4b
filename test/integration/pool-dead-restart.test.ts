/**
 * With the real CLI and a real Redis: the shared dead flag is not
 * forever. A token the upstream really rejects is marked dead in Redis with an expiry (not a
 * permanent 1), and once the upstream accepts it again, a restarted proxy brings it back instead
 * of inheriting the old flag (which would keep it dead across restarts of every replica).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { serveCli, type CliProcess, type ServedCli } from '../helpers/cli.js';
import { until } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { testSecret } from '../helpers/secrets.js';

const TOKENS = {
  a: testSecret('pool-dead-restart token a', 'restart_pool_token_a_51e0'),
  b: testSecret('pool-dead-restart token b', 'restart_pool_token_b_62f1'),
  r: testSecret('pool-dead-restart token r', 'restart_pool_token_r_73a2'),
};

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await request(url);
  return { status: res.statusCode, body: await res.body.text() };
}

async function post(url: string, body: unknown): Promise<void> {
  const res = await request(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  expect(res.statusCode).toBe(200);
  await res.body.dump();
}

describe('with the CLI and Redis, a restart keeps no permanent dead flag', () => {
  let redis: TestRedis;
  let client: Redis;
  let fake: FakeUpstream;
  let configFile: string;
  let configDir: string | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    fake = await startFakeUpstream({
      tokens: parseTokenSpec(
        Object.values(TOKENS)
          .map((t, i) => `${t}@u${i}:public_repo`)
          .join(','),
      ),
    });
    configDir = mkdtempSync(join(tmpdir(), 'etagere-dead-'));
    configFile = join(configDir, 'etagere.yaml');
    writeFileSync(configFile, `redis:\n  key_prefix: "dead-restart-${Date.now()}:"\n`);
  });
  afterAll(async () => {
    if (configDir !== undefined) rmSync(configDir, { recursive: true, force: true });
    client?.disconnect();
    await fake?.close();
    await redis?.stop();
  });

  async function serve(): Promise<ServedCli> {
    const served = await serveCli({
      UPSTREAM_URL: fake.url,
      REDIS_URL: redis.url,
      ETAGERE_CONFIG: configFile,
      ETAGERE_TOKENS: Object.entries(TOKENS)
        .map(([name, value]) => `${name}=${value}`)
        .join(','),
      LOG_LEVEL: 'info',
    });
    await until(
      async () => (await get(`${served.admin}/readyz`).catch(() => ({ status: 0 }))).status === 200,
      20_000,
      'the proxy to be ready',
    );
    return served;
  }

  async function states(admin: string): Promise<Record<string, string>> {
    const rows = (JSON.parse((await get(`${admin}/admin/tokens`)).body) as { tokens: Array<{ name: string; state: string }> }).tokens;
    return Object.fromEntries(rows.map((row) => [row.name, row.state]));
  }

  async function stop(cli: CliProcess): Promise<void> {
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
  }

  it('dead with an expiry in Redis; after the upstream accepts the token again, a restart revives it', async () => {
    await post(`${fake.url}/__fake/tokens`, { token: TOKENS.r, revoked: true });
    const first = await serve();
    try {
      await until(async () => (await states(first.admin)).r === 'dead', 10_000, 'token r to be confirmed dead');
      const keys = await client.keys('*{pool}:t:r');
      expect(keys).toHaveLength(1);
      const flag = Number(await client.hget(keys[0]!, 'dead'));
      // An expiry (epoch ms), not a flag that lasts forever.
      expect(flag).toBeGreaterThan(Date.now());
      expect(flag).toBeLessThanOrEqual(Date.now() + 60 * 60_000);
      expect((await get(`${first.url}/users/octocat`)).status).toBe(200);
    } finally {
      await stop(first.cli);
    }

    await post(`${fake.url}/__fake/tokens`, { token: TOKENS.r, revoked: false });
    const second = await serve();
    try {
      await until(async () => (await states(second.admin)).r === 'ok', 10_000, 'token r to come back after the restart');
      expect(await states(second.admin)).toEqual({ a: 'ok', b: 'ok', r: 'ok' });
      const keys = await client.keys('*{pool}:t:r');
      expect(Number(await client.hget(keys[0]!, 'dead'))).toBeLessThan(Date.now());
      expect((await get(`${second.url}/users/octocat?after=restart`)).status).toBe(200);
    } finally {
      await stop(second.cli);
    }
    const output = `${first.cli.stdout()}${first.cli.stderr()}${second.cli.stdout()}${second.cli.stderr()}`;
    expect(output).toMatch(/"tokenName":"r".*confirmed by GET \/rate_limit/);
    for (const secret of Object.values(TOKENS)) expect(output).not.toContain(secret);
  }, 60_000);
});
