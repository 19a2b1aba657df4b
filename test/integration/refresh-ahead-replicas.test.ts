/**
 * Refresh ahead across two etagere processes behind one Redis: both read a hot entry, so both
 * schedule its refresh, and the flight lock (or the newer entry the other replica stored) lets
 * exactly one of them go upstream per lifetime; after the lifetime both answer fresh hits.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { get } from '../helpers/http.js';
import { counterBy } from '../helpers/metrics-text.js';
import { until } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { metric, startReplicas, stopReplicas, type Replica } from '../helpers/replicas.js';

const ALICE = { authorization: 'token demo_token_alice_repo' };
// Long enough that the refreshed entry (its Date in whole seconds: up to 1 s old on arrival) outlives the first lifetime.
const LIFETIME_MS = 4_000;

describe('refresh ahead on two replicas', () => {
  let redis: TestRedis;
  let fake: FakeUpstream;
  let replicas: Replica[] = [];
  let dir: string;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({});
    dir = mkdtempSync(join(tmpdir(), 'etagere-refresh-ahead-'));
    const config = join(dir, 'etagere.yaml');
    writeFileSync(
      config,
      [
        'upstreams:',
        '  - name: github',
        '    prefix: /',
        `    url: ${fake.url}`,
        '    cache:',
        `      max_age_cap_seconds: ${LIFETIME_MS / 1000}`,
        '      refresh_ahead: true',
        '',
      ].join('\n'),
    );
    replicas = await startReplicas(2, { REDIS_URL: redis.url, ETAGERE_CONFIG: config });
  }, 60_000);
  afterAll(async () => {
    await stopReplicas(replicas);
    await fake?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const results = async (): Promise<Record<string, number>> => {
    const texts = await Promise.all(replicas.map((r) => metric(r.adminUrl, 'etagere_refresh_ahead_total')));
    const sum: Record<string, number> = {};
    for (const text of texts)
      for (const [result, count] of Object.entries(counterBy(text, 'etagere_refresh_ahead_total', 'result')))
        sum[result] = (sum[result] ?? 0) + count;
    return sum;
  };

  it('both replicas read a hot entry; one refresh goes upstream (a free 304) and both answer fresh hits after the lifetime', async () => {
    const path = '/repos/octocat/hello-world';
    const [first, second] = replicas as [Replica, Replica];
    expect((await get(first.url + path, ALICE)).status).toBe(200);
    const storedAt = Date.now();
    // The second replica reads twice: its first read may still follow the first replica's flight (the
    // entry not yet in L2), which is that replica's fetch, not a read of a stored entry; the next is a hit.
    for (const replica of [second, second, first])
      expect(String((await get(replica.url + path, ALICE)).headers['cache-status'])).toMatch(/^etagere; hit/);
    await until(async () => Object.values(await results()).reduce((x, y) => x + y, 0) >= 2, 8_000, 'both replicas’ refreshes to settle');
    expect((await results()).not_modified).toBe(1);
    expect(fake.stats().notModified).toBe(1);
    expect(fake.stats().total).toBe(2);
    await until(() => Date.now() > storedAt + LIFETIME_MS + 100, 5_000, 'the first lifetime to end');
    for (const replica of [first, second])
      expect(String((await get(replica.url + path, ALICE)).headers['cache-status'])).toMatch(/^etagere; hit/);
    expect(fake.stats().total).toBe(2);
  }, 30_000);
});
