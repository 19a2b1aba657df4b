/**
 * One consumer must not starve the others. Against the fake GitHub
 * API with a small pool: a greedy consumer's cache-busting requests spend its share and borrow
 * down to the other consumer's reserve, never further (the other is still served); a greedy
 * burst of concurrent misses never holds another consumer's request for long.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { get, type Answer } from '../helpers/http.js';
import { awayFromHourEdge, HOUR_EDGE_WAIT_MS } from '../helpers/clock.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { counterSum } from '../helpers/metrics-text.js';

const TOKENS = { a: 'pool_secret_token_fair_aaaa1111', b: 'pool_secret_token_fair_bbbb2222' };
const FAKE_TOKENS = parseTokenSpec(`${TOKENS.a}@alice:public_repo,${TOKENS.b}@bob:public_repo`);
const KEYS = { greedy: 'consumer_key_greedy_7c1e0a', polite: 'consumer_key_polite_93bd44', third: 'consumer_key_third_2f6a10' };
const SECRETS = [...Object.values(TOKENS), ...Object.values(KEYS)];

const proxies: TestProxy[] = [];
const fakes: FakeUpstream[] = [];
afterEach(async () => {
  for (const proxy of proxies.splice(0)) {
    const texts = [
      (await get(`${proxy.adminUrl}/metrics`)).body,
      (await get(`${proxy.adminUrl}/admin/consumers`)).body,
      (await get(`${proxy.adminUrl}/admin/status`)).body,
    ];
    await proxy.close();
    for (const secret of SECRETS) {
      expect(proxy.logText()).not.toContain(secret);
      for (const text of texts) expect(text).not.toContain(secret);
    }
  }
  for (const fake of fakes.splice(0)) await fake.close();
});

async function setup(
  fakeOpts: Parameters<typeof startFakeUpstream>[0],
  pool: Record<string, unknown>,
  consumers: Record<string, unknown> = {},
): Promise<{ fake: FakeUpstream; proxy: TestProxy }> {
  const fake = await startFakeUpstream({ tokens: FAKE_TOKENS, ...fakeOpts });
  fakes.push(fake);
  const proxy = await startTestProxy({
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { policy: 'max-age' } }],
    pool: {
      tokens: [
        { name: 'a', value: TOKENS.a },
        { name: 'b', value: TOKENS.b },
      ],
      ...pool,
    },
    consumers: {
      enabled: true,
      keys: [
        { name: 'greedy', value: KEYS.greedy },
        { name: 'polite', value: KEYS.polite },
      ],
      ...consumers,
    },
  });
  proxies.push(proxy);
  return { fake, proxy };
}

async function queueLength(proxy: TestProxy): Promise<number> {
  const text = (await get(`${proxy.adminUrl}/metrics`)).body;
  return Number(/^etagere_pool_queue_length (\d+)/m.exec(text)?.[1] ?? 0);
}

const as = (key: string) => ({ 'x-etagere-key': key });

describe('fair share between consumers', () => {
  it(
    'a greedy consumer spends its share and borrows down to the reserve of the other, who is still served',
    async () => {
      await awayFromHourEdge();
      // 2 tokens x 50: a pool of 100 an hour; two consumers of weight 1: shares 50, reserves 25.
      const { fake, proxy } = await setup({ tokenLimit: 50 }, {});
      const greedy: Answer[] = [];
      for (let i = 0; i < 100; i += 10) {
        const batch = Array.from({ length: 10 }, (_, j) => get(`${proxy.url}/repos/etagere-org/repo-001?bust=${i + j}`, as(KEYS.greedy)));
        greedy.push(...(await Promise.all(batch)));
      }
      const served = greedy.filter((a) => a.status === 200).length;
      expect(served).toBeGreaterThanOrEqual(50); // at least its own share
      expect(served).toBeLessThanOrEqual(75); // never the other consumer's reserve
      const refused = greedy.filter((a) => a.status !== 200);
      expect(new Set(refused.map((a) => a.status))).toEqual(new Set([429]));
      for (const answer of refused) {
        const retryAfter = Number(answer.headers['retry-after']);
        expect(retryAfter).toBeGreaterThanOrEqual(1);
        expect(retryAfter).toBeLessThanOrEqual(3600);
        const body = JSON.parse(answer.body) as { message: string; documentation_url: string };
        expect(body.message).toMatch(/consumer/i);
        expect(body.message).toMatch(/share/i);
        expect(body.documentation_url).toMatch(/^https:\/\//);
      }

      // The polite consumer arrives late in the window and still finds at least its reserve (25).
      const polite: Answer[] = [];
      for (let i = 0; i < 25; i++) polite.push(await get(`${proxy.url}/repos/etagere-org/repo-002?n=${i}`, as(KEYS.polite)));
      expect(polite.map((a) => a.status)).toEqual(Array.from({ length: 25 }, () => 200));
      // The greedy one is still refused: the polite one's reserve is not lent out.
      expect((await get(`${proxy.url}/repos/etagere-org/repo-001?bust=late`, as(KEYS.greedy))).status).toBe(429);
      // A cached answer costs no quota and is served even over the share.
      expect((await get(`${proxy.url}/repos/etagere-org/repo-001?bust=0`, as(KEYS.greedy))).status).toBe(200);

      const stats = fake.stats();
      expect(stats.byStatus['403']).toBeUndefined();
      expect(stats.byStatus['429']).toBeUndefined();
    },
    20_000 + HOUR_EDGE_WAIT_MS,
  );

  it('300 concurrent misses from one consumer never hold another consumer for a second', async () => {
    // 2 tokens x 2 slots and a slow upstream: 300 misses queue for about 300 / 4 x 60 ms = 4.5 s. The
    // queue is the subject, not pacing (pool-pacing tests): points enough that only the slots bound the burst.
    const slots = { per_token_concurrency: 2, max_concurrency: 4, queue_timeout_ms: 30_000, points_per_minute: 100_000 };
    const { proxy } = await setup({ latencyMs: 60 }, slots);
    const burst = Array.from({ length: 300 }, (_, i) => get(`${proxy.url}/repos/etagere-org/repo-001?burst=${i}`, as(KEYS.greedy)));
    await until(async () => (await queueLength(proxy)) > 200, 10_000, 'the burst to queue');
    const started = performance.now();
    const answer = await get(`${proxy.url}/repos/etagere-org/repo-002`, as(KEYS.polite));
    const waited = performance.now() - started;
    expect(answer.status).toBe(200);
    expect(waited).toBeLessThan(1_000);
    const burstAnswers = await Promise.all(burst);
    expect(burstAnswers.filter((a) => a.status !== 200)).toEqual([]);
  }, 30_000);

  it('counts requests, hits, upstream requests and quota spent by consumer name, in /metrics, /admin/consumers and /admin/status', async () => {
    const { proxy } = await setup({ tokenLimit: 50 }, {});
    for (let i = 0; i < 3; i++) expect((await get(`${proxy.url}/users/octocat`, as(KEYS.greedy))).status).toBe(200);
    expect((await get(`${proxy.url}/users/octocat?polite=1`, as(KEYS.polite))).status).toBe(200);
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(counterSum(metrics, 'etagere_consumer_requests_total', { consumer: 'greedy' })).toBe(3);
    expect(counterSum(metrics, 'etagere_consumer_hits_total', { consumer: 'greedy' })).toBe(2);
    expect(counterSum(metrics, 'etagere_consumer_upstream_requests_total', { consumer: 'greedy' })).toBe(1);
    expect(metrics).toContain('etagere_consumer_quota_spent_total{consumer="greedy",resource="core"} 1');
    expect(metrics).toContain('etagere_consumer_quota_spent_total{consumer="polite",resource="core"} 1');

    const answer = await get(`${proxy.adminUrl}/admin/consumers`);
    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toMatch(/application\/json/);
    const report = JSON.parse(answer.body) as {
      enabled: boolean;
      budget: string;
      reserve_fraction: number;
      consumers: Array<Record<string, unknown> & { name: string; resources: Record<string, Record<string, number>> }>;
    };
    expect(report).toMatchObject({ enabled: true, budget: 'local', reserve_fraction: 0.5 });
    const greedy = report.consumers.find((c) => c.name === 'greedy')!;
    expect(greedy).toMatchObject({
      weight: 1,
      requests: 3,
      hits: 2,
      upstream_requests: 1,
      quota_spent: 1,
      in_flight: 0,
      max_per_hour: null,
    });
    expect(greedy.resources.core).toMatchObject({ share: 50, reserve: 25, spent: 1 });
    expect(report.consumers.map((c) => c.name).sort()).toEqual(['greedy', 'polite']);

    const status = JSON.parse((await get(`${proxy.adminUrl}/admin/status`)).body) as { consumers: Array<{ name: string; hits: number }> };
    expect(status.consumers.find((c) => c.name === 'greedy')?.hits).toBe(2);
    const page = (await get(`${proxy.adminUrl}/`)).body;
    expect(page).toContain('id="consumers"');
    // Nothing about keys: not the values, not even the header's name with a value.
    for (const text of [metrics, answer.body]) for (const key of Object.values(KEYS)) expect(text).not.toContain(key);
  });

  it(
    'weights divide the pool; max_per_hour and max_concurrency hold one consumer back, never the other',
    async () => {
      await awayFromHourEdge();
      const { proxy } = await setup(
        { tokenLimit: 50, latencyMs: 40 },
        {},
        {
          keys: [
            { name: 'greedy', value: KEYS.greedy, weight: 3, max_concurrency: 1 },
            { name: 'polite', value: KEYS.polite },
            { name: 'third', value: KEYS.third, max_per_hour: 2 },
          ],
        },
      );
      // max_per_hour: the third consumer's third request is refused, with a Retry-After to the end of the hour.
      for (let i = 0; i < 2; i++) expect((await get(`${proxy.url}/users/octocat?third=${i}`, as(KEYS.third))).status).toBe(200);
      const capped = await get(`${proxy.url}/users/octocat?third=late`, as(KEYS.third));
      expect(capped.status).toBe(429);
      expect(JSON.parse(capped.body).message).toMatch(/max_per_hour/);
      const untilHour = Math.ceil((3_600_000 - (Date.now() % 3_600_000)) / 1000);
      expect(Math.abs(Number(capped.headers['retry-after']) - untilHour)).toBeLessThanOrEqual(2);
      // A cached answer is still served: the cap counts upstream requests only.
      expect((await get(`${proxy.url}/users/octocat?third=0`, as(KEYS.third))).status).toBe(200);

      // max_concurrency 1: four concurrent misses of the greedy consumer go one at a time...
      const started = performance.now();
      const four = Array.from({ length: 4 }, (_, i) => get(`${proxy.url}/repos/etagere-org/repo-001?one=${i}`, as(KEYS.greedy)));
      // ...while the polite one is not held behind them.
      const politeStarted = performance.now();
      expect((await get(`${proxy.url}/repos/etagere-org/repo-002?p=1`, as(KEYS.polite))).status).toBe(200);
      const politeTook = performance.now() - politeStarted;
      expect((await Promise.all(four)).map((a) => a.status)).toEqual([200, 200, 200, 200]);
      expect(performance.now() - started).toBeGreaterThanOrEqual(4 * 40 - 5);
      expect(politeTook).toBeLessThan(4 * 40);

      // weight 3 of 5 (3 + 1 + 1): greedy's share of 100 is 60; it borrows down to the others' reserves (10 each).
      const greedy: number[] = [];
      for (let i = 0; i < 90; i++) greedy.push((await get(`${proxy.url}/repos/etagere-org/repo-003?w=${i}`, as(KEYS.greedy))).status);
      const served = greedy.filter((status) => status === 200).length + 4;
      // The third consumer spent 2 of its reserve of 10 and polite 1 of its 10: greedy stops at 100 - 8 - 9 - 3 = 80.
      expect(served).toBe(80);
      expect(greedy.filter((status) => status !== 200).every((status) => status === 429)).toBe(true);
      const report = JSON.parse((await get(`${proxy.adminUrl}/admin/consumers`)).body) as {
        consumers: Array<{ name: string; refused: Record<string, number> }>;
      };
      const refusals = Object.fromEntries(report.consumers.map((c) => [c.name, c.refused]));
      expect(refusals.third).toEqual({ max_per_hour: 1 });
      expect(refusals.greedy).toEqual({ share: 90 - 76 });
      expect(refusals.polite).toEqual({});
    },
    30_000 + HOUR_EDGE_WAIT_MS,
  );
});
