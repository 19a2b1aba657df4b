/**
 * Pacing against the fake upstream that enforces GitHub's secondary-limit points: the proxy keeps
 * its token under them (no secondary-limit answer from the fake, clients get a 429 with Retry-After
 * or a stale entry), where the same load without pacing trips them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

const TOKEN = 'pacing_integration_token';
const LIMIT = 12; // the fake's points a minute; the proxy's bursts: 3 in any 10 s

interface Rig {
  fake: FakeUpstream;
  proxy: TestProxy;
}

async function rig(pointsPerMinute: number): Promise<Rig> {
  const fake = await startFakeUpstream({
    tokens: parseTokenSpec(`${TOKEN}@alice:public_repo`),
    enforcePoints: true,
    pointsPerMinute: LIMIT,
  });
  const proxy = await startTestProxy({
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { policy: 'revalidate' } }],
    pool: { tokens: [{ name: 'paced', value: TOKEN }], points_per_minute: pointsPerMinute, queue_timeout_ms: 200 },
  });
  return { fake, proxy };
}

async function refusedByFake(fake: FakeUpstream): Promise<number> {
  const res = await request(`${fake.url}/__fake/secondary`);
  return ((await res.body.json()) as { points: { refused: number } }).points.refused;
}

/** `count` requests at once for distinct users; their statuses, Retry-After and bodies. */
async function burst(proxy: TestProxy, count: number): Promise<Array<{ status: number; retryAfter: string | undefined; body: string }>> {
  return Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const res = await request(`${proxy.url}/users/user-${index}`);
      const retryAfter = res.headers['retry-after'];
      return { status: res.statusCode, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined, body: await res.body.text() };
    }),
  );
}

describe('pacing against an upstream that enforces secondary-limit points', () => {
  let current: Rig | undefined;
  afterEach(async () => {
    await current?.proxy.close();
    await current?.fake.close();
    current = undefined;
  });

  it('keeps the token under the points: no secondary-limit answer upstream; clients past the burst get 429 with Retry-After', async () => {
    current = await rig(LIMIT);
    const answers = await burst(current.proxy, 12);
    expect(await refusedByFake(current.fake)).toBe(0);
    const paced = answers.filter((answer) => answer.status === 429);
    expect(paced.length).toBeGreaterThan(0);
    for (const answer of paced) {
      expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(JSON.parse(answer.body)).toMatchObject({ message: expect.stringMatching(/secondary rate limit points/) as unknown });
    }
    expect(answers.every((answer) => answer.status === 200 || answer.status === 404 || answer.status === 429)).toBe(true);
  });

  it('serves a stored entry stale while the points are spent, rather than a 429', async () => {
    current = await rig(LIMIT);
    const first = await request(`${current.proxy.url}/users/octocat`);
    await first.body.dump();
    expect(first.statusCode).toBe(200);
    await burst(current.proxy, 12); // spends what is left of the burst
    const again = await request(`${current.proxy.url}/users/octocat`);
    await again.body.dump();
    expect(again.statusCode).toBe(200);
    expect(String(again.headers['cache-status'])).toContain('detail=pool-paced');
    expect(await refusedByFake(current.fake)).toBe(0);
  });

  it('the same load without pacing trips the secondary limit', async () => {
    current = await rig(1_000_000);
    await burst(current.proxy, 16);
    expect(await refusedByFake(current.fake)).toBeGreaterThan(0);
  });
});
