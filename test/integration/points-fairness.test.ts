/**
 * Points shared fairly and charged to whoever spends them, against the fake GitHub enforcing the
 * secondary-limit points: one consumer re-requests its own cached entries with forced
 * revalidations (each a conditional request answered 304, free of quota but not of points) in four
 * loops. The scenario at 10 x its rate (600 points a minute, a miss every 300 ms: a third
 * of the points) with the same goals: a consumer capped at max_per_hour 10 makes at most 11
 * upstream requests; uncapped, it leaves the other consumer at least 9 of 10 misses answered 200.
 * The full-size scenario is `npm run bench:quota -- --fairness` (bench/fairness.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { get } from '../helpers/http.js';
import { awayFromHourEdge, HOUR_EDGE_WAIT_MS } from '../helpers/clock.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

const TOKEN = 'points_fairness_pool_token_5d1e';
const KEYS = { abuser: 'points_fairness_key_abuser_77a0', polite: 'points_fairness_key_polite_31c9' };
const POINTS = 600;
const INTERVAL_MS = 300;
/** Forced revalidations, hostile variants included: each is honoured, each goes upstream. */
const FORCING: ReadonlyArray<Record<string, string>> = [
  { 'cache-control': 'max-age=0' },
  { 'cache-control': 'no-cache' },
  { pragma: 'no-cache' },
  { 'cache-control': 'MAX-AGE=0, max-stale=0' },
  { 'cache-control': 'max-age=0', 'if-none-match': '"whatever"' },
];

const abuserPath = (loop: number): string => `/repos/etagere-org/repo-00${loop + 1}`;
const politePath = (miss: number): string => `/repos/etagere-org/repo-0${10 + miss}`;

interface Rig {
  fake: FakeUpstream;
  proxy: TestProxy;
}
const rigs: Rig[] = [];
afterEach(async () => {
  for (const rig of rigs.splice(0)) {
    await rig.proxy.close();
    await rig.fake.close();
  }
});

async function rig(maxPerHour: number | null): Promise<Rig> {
  const fake = await startFakeUpstream({
    tokens: parseTokenSpec(`${TOKEN}@alice:public_repo`),
    enforcePoints: true,
    pointsPerMinute: POINTS,
  });
  const proxy = await startTestProxy({
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { policy: 'max-age', client_no_cache: 'honor' } }],
    // A short queue timeout: a wait for points that come back in 10 s is refused, as the issue saw.
    pool: { tokens: [{ name: 'only', value: TOKEN }], points_per_minute: POINTS, queue_timeout_ms: 2_000 },
    consumers: {
      enabled: true,
      keys: [
        { name: 'abuser', value: KEYS.abuser, max_per_hour: maxPerHour },
        { name: 'polite', value: KEYS.polite },
      ],
    },
  });
  const made = { fake, proxy };
  rigs.push(made);
  return made;
}

/** The abuser's entries cached, the polite consumer's first miss answered; then four loops force revalidations while the polite consumer misses every 300 ms. */
async function contend({ fake, proxy }: Rig) {
  const abuser = { 'x-etagere-key': KEYS.abuser };
  for (let loop = 0; loop < 4; loop++) expect((await get(`${proxy.url}${abuserPath(loop)}`, abuser)).status).toBe(200);
  const polite = [(await get(`${proxy.url}${politePath(0)}`, { 'x-etagere-key': KEYS.polite })).status];
  let done = false;
  const loops = Array.from({ length: 4 }, async (_, loop) => {
    for (let i = 0; !done; i++) {
      const res = await request(`${proxy.url}${abuserPath(loop)}`, { headers: { ...abuser, ...FORCING[(loop + i) % FORCING.length] } });
      await res.body.dump();
    }
  });
  const misses: Array<Promise<number>> = [];
  for (let miss = 1; miss < 10; miss++) {
    await new Promise((resolve) => setTimeout(resolve, INTERVAL_MS));
    misses.push(get(`${proxy.url}${politePath(miss)}`, { 'x-etagere-key': KEYS.polite }).then((answer) => answer.status));
  }
  polite.push(...(await Promise.all(misses)));
  done = true;
  await Promise.all(loops);
  const byPath = fake.stats().byPath;
  let abuserUpstream = 0;
  for (let loop = 0; loop < 4; loop++) abuserUpstream += byPath[abuserPath(loop)] ?? 0;
  const secondary = (await (await request(`${fake.url}/__fake/secondary`)).body.json()) as { points: { refused: number } };
  return { abuserUpstream, polite, refusedByFake: secondary.points.refused };
}

describe('points shared fairly and charged to whoever spends them', () => {
  it(
    'forced revalidations answered 304 count against max_per_hour: a consumer capped at 10 makes at most 11 upstream requests',
    async () => {
      await awayFromHourEdge();
      const capped = await rig(10);
      const { abuserUpstream, polite, refusedByFake } = await contend(capped);
      expect(abuserUpstream).toBeLessThanOrEqual(11);
      expect(abuserUpstream).toBeGreaterThanOrEqual(10); // 4 first fetches, then forced revalidations up to the cap
      expect(polite.filter((status) => status === 200).length).toBeGreaterThanOrEqual(9);
      expect(refusedByFake).toBe(0);
      const report = JSON.parse((await get(`${capped.proxy.adminUrl}/admin/consumers`)).body) as {
        consumers: Array<{ name: string; spent_this_hour: number; max_per_hour: number | null }>;
      };
      expect(report.consumers.find((consumer) => consumer.name === 'abuser')).toMatchObject({ spent_this_hour: 10, max_per_hour: 10 });
    },
    20_000 + HOUR_EDGE_WAIT_MS,
  );

  it('uncapped, a consumer taking every point as it comes back leaves the other at least 9 of 10 misses answered 200', async () => {
    const uncapped = await rig(null);
    const { abuserUpstream, polite, refusedByFake } = await contend(uncapped);
    expect(polite.filter((status) => status === 200).length).toBeGreaterThanOrEqual(9);
    expect(polite.every((status) => status === 200 || status === 429)).toBe(true);
    // The points the polite consumer leaves are the abuser's: it still takes most of the window's 101.
    expect(abuserUpstream).toBeGreaterThanOrEqual(50);
    expect(refusedByFake).toBe(0);
  }, 20_000);
});
