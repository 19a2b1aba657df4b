/**
 * Two replicas sharing one Redis, entries fresh for 600 s where webhooks
 * cover them. The fake upstream changes a repository and sends its signed webhook to one replica;
 * within a second the next read through either replica shows the change, in every partition. A
 * purge, by path or by prefix, on one replica does the same on the other; a replica that starts
 * after a delivery still knows what it marked.
 */
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { get } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { testSecret } from '../helpers/secrets.js';
import { answered, deliver, mutate, pointFakeAt } from '../helpers/webhooks.js';

const SECRET = testSecret('webhook secret of the replicas test', 'whsec-replicas-fedcba9876543210');
const ALICE = { authorization: 'token demo_token_alice_repo' };

const starsOf = (body: string): number => (JSON.parse(body) as { stargazers_count: number }).stargazers_count;

/** Reads `path` through `proxy` until it shows `stars`, for at most `ms`; returns how long it took. */
async function showsWithin(
  proxy: TestProxy,
  path: string,
  stars: number,
  ms: number,
  headers: Record<string, string> = {},
): Promise<number> {
  const started = Date.now();
  await until(
    async () => starsOf((await get(proxy.url + path, headers)).body) === stars,
    ms,
    `${path} with ${stars} stars on ${proxy.url}`,
  );
  return Date.now() - started;
}

/** A replica's L1 entry for `path` as /admin/cache shows it (stale: no freshness left), or undefined. */
async function heldInL1(proxy: TestProxy, path: string): Promise<{ stale: boolean } | undefined> {
  const res = await request(`${proxy.adminUrl}/admin/cache?path=${encodeURIComponent(path)}`);
  const { entries } = (await res.body.json()) as { entries: Array<{ ttl: number }> };
  return entries.length === 0 ? undefined : { stale: entries[0]!.ttl <= 0 };
}

async function purge(proxy: TestProxy, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await request(`${proxy.adminUrl}/admin/purge`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> };
}

describe('webhooks across two replicas sharing Redis (webhook_fresh_seconds: 600)', () => {
  let redis: TestRedis;
  let fake: FakeUpstream;
  const proxies: TestProxy[] = [];
  let config: Record<string, unknown>;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    config = {
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, cache: { policy: 'max-age', webhook_fresh_seconds: 600 } }],
      redis: { url: redis.url },
      webhooks: { secret: SECRET, owners: ['etagere-org', 'octocat'] },
    };
    proxies.push(await startTestProxy(config), await startTestProxy(config));
  }, 60_000);
  afterAll(async () => {
    for (const proxy of proxies) await proxy.close();
    await fake?.close();
    await redis?.stop();
  });

  it('the fake changes a repository and sends its webhook: within 1 s both replicas show the change, in every partition', async () => {
    const [first, second] = proxies as [TestProxy, TestProxy];
    await pointFakeAt(fake, first.url, SECRET);
    const path = '/repos/etagere-org/repo-001';
    for (const proxy of [first, second]) {
      await get(proxy.url + path);
      await get(proxy.url + path, ALICE);
      // Fresh for 600 s, not GitHub's 60: both partitions answer from the cache.
      expect((await get(proxy.url + path)).headers['cache-status']).toMatch(/hit; ttl=(59\d|600)\b/);
      expect((await get(proxy.url + path, ALICE)).headers['cache-status']).toMatch(/hit/);
    }
    const started = Date.now();
    const { stars, deliveries } = await mutate(fake, path);
    // Each read waits for its answer: within the second, the next read shows the change.
    await showsWithin(second, path, stars, 1_000);
    await showsWithin(second, path, stars, 1_000 - (Date.now() - started), ALICE);
    await showsWithin(first, path, stars, 1_000 - (Date.now() - started));
    expect(Date.now() - started).toBeLessThan(1_000);
    expect((await answered(fake, deliveries)).every((record) => record.status === 200)).toBe(true);
    // The second delivery (watch) marks it again when its notice arrives: a revalidation with its
    // ETag (a 304), then fresh again for 600 s.
    await until(
      async () => /hit; ttl=(59\d|600)\b/.test(String((await get(second.url + path)).headers['cache-status'])),
      2_000,
      'fresh again',
    );
  });

  it('a delivery redelivered to the other replica is acknowledged there and not applied twice (Redis)', async () => {
    const [first, second] = proxies as [TestProxy, TestProxy];
    const payload = { action: 'created', repository: { id: 2003, full_name: 'etagere-org/repo-003' }, sender: { login: 'octocat' } };
    const delivery = randomUUID();
    const applied = await deliver(first.url, SECRET, 'star', payload, { delivery });
    expect(JSON.parse(applied.body)).toMatchObject({ message: 'Applied', delivery });
    const again = await deliver(second.url, SECRET, 'star', payload, { delivery });
    expect(again.status).toBe(200);
    expect(JSON.parse(again.body)).toMatchObject({ message: 'Duplicate delivery: already applied', delivery });
  });

  it('a replica that starts after a delivery knows what it marked (the marks kept in Redis)', async () => {
    const [first] = proxies as [TestProxy];
    await pointFakeAt(fake, first.url, SECRET);
    const path = '/repos/etagere-org/repo-002';
    await get(first.url + path); // in L2 now, fresh for 600 s
    const { stars, deliveries } = await mutate(fake, path);
    await answered(fake, deliveries);
    const late = await startTestProxy(config);
    proxies.push(late);
    const read = await get(late.url + path);
    expect(starsOf(read.body)).toBe(stars);
    expect(read.headers['cache-status']).toMatch(/fwd=stale; fwd-status=200/); // found in L2, known stale, revalidated
  });

  it('a purge by path on one replica marks the entry stale on the other', async () => {
    const [first, second] = proxies as [TestProxy, TestProxy];
    await request(`${fake.url}/__fake/webhooks`, { method: 'POST', body: JSON.stringify({ url: null }) }).then((res) => res.body.dump());
    const path = '/repos/octocat/hello-world';
    await get(second.url + path);
    await get(second.url + path, ALICE);
    const { stars } = await mutate(fake, path); // no webhook this time: nothing tells the replicas
    expect(starsOf((await get(second.url + path)).body)).toBe(stars - 1);
    const purged = await purge(first, { upstream: 'github', path });
    expect(purged.status).toBe(200);
    expect(purged.json).toMatchObject({ upstreams: ['github'], path, replicas: 'every replica (Redis)' });
    await showsWithin(second, path, stars, 1_000);
    await showsWithin(second, path, stars, 1_000, ALICE);
  });

  it('a purge by prefix covers whole segments, on every replica', async () => {
    const [first, second] = proxies as [TestProxy, TestProxy];
    await request(`${fake.url}/__fake/webhooks`, { method: 'POST', body: JSON.stringify({ url: null }) }).then((res) => res.body.dump());
    const inside = ['/repos/etagere-org/repo-010', '/repos/etagere-org/repo-011'];
    const outside = '/repos/octocat/linguist';
    for (const path of [...inside, outside]) await get(second.url + path);
    const changed = await Promise.all([...inside, outside].map((path) => mutate(fake, path)));
    const purged = await purge(first, { prefix: '/repos/etagere-org/' });
    expect(purged.status).toBe(200);
    for (const [index, path] of inside.entries()) await showsWithin(second, path, changed[index]!.stars, 1_000);
    const untouched = await get(second.url + outside);
    expect(untouched.headers['cache-status']).toMatch(/hit/);
    expect(starsOf(untouched.body)).toBe(changed[2]!.stars - 1);
  });

  it('after a delivery, reads on both replicas for two seconds go upstream once for the change, never again for the same mark', async () => {
    const [first, second] = proxies as [TestProxy, TestProxy];
    await request(`${fake.url}/__fake/webhooks`, { method: 'POST', body: JSON.stringify({ url: null }) }).then((res) => res.body.dump());
    const path = '/repos/octocat/spoon-knife'; // no earlier mark covers it
    await get(first.url + path); // fetched by the first replica, written to L2
    expect((await get(second.url + path)).headers['cache-status']).not.toMatch(/fwd=/); // read from L2
    const { stars } = await mutate(fake, path);
    // Early in a second: the reads below share the mark's second of `Date` (whole seconds).
    await until(() => Date.now() % 1_000 < 100, 2_000, 'the start of a second');
    const fetchedBefore = fake.stats().byPath[path] ?? 0;
    const payload = { action: 'created', repository: { id: 1300192, full_name: 'octocat/spoon-knife' }, sender: { login: 'octocat' } };
    const marked = Date.now();
    expect((await deliver(first.url, SECRET, 'star', payload)).status).toBe(200);
    await until(async () => (await heldInL1(second, path))?.stale === true, 2_000, 'the mark on the second replica');

    const upstream = new Map<TestProxy, number>([
      [first, 0],
      [second, 0],
    ]);
    const read = async (proxy: TestProxy): Promise<void> => {
      const res = await get(proxy.url + path);
      expect(starsOf(res.body)).toBe(stars);
      if (/fwd=/.test(String(res.headers['cache-status']))) upstream.set(proxy, upstream.get(proxy)! + 1);
    };
    await read(first); // the receiving replica refetches: its copy was marked
    // The second replica drops its marked copy when the first's new entry is written to L2.
    await until(async () => (await heldInL1(second, path)) === undefined, 2_000, "the first replica's entry noticed");
    // Reads on both replicas, alternating, until two seconds after the mark: each finds the
    // refetched entry (in L1, or in L2 where the other replica wrote it) fresh.
    await until(
      async () => {
        await read(second);
        await read(first);
        return Date.now() - marked > 2_000;
      },
      10_000,
      'two seconds of reads',
    );
    expect([upstream.get(first), upstream.get(second)]).toEqual([1, 0]);
    expect((fake.stats().byPath[path] ?? 0) - fetchedBefore).toBe(1);
  });

  it('purge refuses what it cannot do, in GitHub-shaped JSON', async () => {
    const [first] = proxies as [TestProxy];
    expect((await purge(first, { path: '/x', prefix: '/y' })).status).toBe(400);
    expect((await purge(first, {})).status).toBe(400);
    expect((await purge(first, { path: 'no-slash' })).status).toBe(400);
    expect((await purge(first, { path: '/x?q=1' })).status).toBe(400);
    expect((await purge(first, { path: '/x', upstream: 'nope' })).status).toBe(404);
    expect((await purge(first, { path: '/x', extra: 1 })).status).toBe(400);
    expect((await purge(first, [1, 2])).status).toBe(400);
    const read = await request(`${first.adminUrl}/admin/purge`);
    expect(read.statusCode).toBe(405);
    expect(read.headers.allow).toBe('POST');
    await read.body.dump();
  });
});
