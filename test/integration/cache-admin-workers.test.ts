/**
 * `workers: 2` without Redis: the primary serves the admin port but holds no cache, so purge,
 * inspect and stats go to every worker over IPC and their answers are combined.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { serveCli, type CliProcess } from '../helpers/cli.js';
import { until } from '../helpers/proxy.js';

const PATH = '/repos/octocat/hello-world';

async function json(
  url: string,
  init: { method?: 'GET' | 'POST'; body?: string } = {},
): Promise<{ status: number; value: Record<string, unknown> }> {
  const res = await request(url, { ...init, headers: init.body === undefined ? {} : { 'content-type': 'application/json' } });
  return { status: res.statusCode, value: (await res.body.json()) as Record<string, unknown> };
}

describe('the admin cache endpoints of a cluster primary (workers: 2, no Redis)', () => {
  let fake: FakeUpstream;
  let cli: CliProcess;
  let url: string;
  let admin: string;

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    ({ cli, url, admin } = await serveCli({ UPSTREAM_URL: fake.url, WORKERS: '2', LOG_LEVEL: 'warn' }));
    await until(
      async () =>
        (await request(`${admin}/readyz`)
          .then((res) => res.statusCode)
          .catch(() => 0)) === 200,
      30_000,
      'both workers',
    );
  }, 40_000);
  afterAll(async () => {
    cli?.child.kill('SIGKILL');
    await fake?.close();
  });

  it('purge, inspect and stats combine the workers', async () => {
    // Enough connections that both workers get some (the kernel spreads them).
    await Promise.all(Array.from({ length: 20 }, () => request(url + PATH, { reset: true }).then((res) => res.body.dump())));
    const inspected = await json(`${admin}/admin/cache?path=${encodeURIComponent(PATH)}`);
    expect(inspected.status).toBe(200);
    const entries = inspected.value.entries as Array<{ worker: number; partition: string }>;
    expect(entries.length).toBeGreaterThanOrEqual(1);
    expect(entries.every((entry) => entry.partition === 'pool' || entry.partition === 'anonymous')).toBe(true);
    const stats = await json(`${admin}/admin/cache/stats`);
    expect(stats.value).toMatchObject({ workers: 2 });
    expect(stats.value.entries).toBe(entries.length);
    const purged = await json(`${admin}/admin/purge`, { method: 'POST', body: JSON.stringify({ path: PATH }) });
    expect(purged.status).toBe(200);
    expect(purged.value).toMatchObject({ path: PATH, marked: entries.length, workers: 2, replicas: "this machine's workers" });
    const bad = await json(`${admin}/admin/purge`, { method: 'POST', body: JSON.stringify({ path: 'x' }) });
    expect(bad.status).toBe(400);
  });
});
