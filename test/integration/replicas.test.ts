/**
 * Three etagere processes (real child processes) behind one Redis and one fake upstream behave
 * as one proxy: a cold key requested 300 times at once across them costs one upstream request.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { until } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { metric, startReplicas, stopReplicas, type Replica } from '../helpers/replicas.js';

describe('three replicas, one Redis', () => {
  let redis: TestRedis;
  let fake: FakeUpstream;
  let replicas: Replica[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000, latencyMs: 20 });
    replicas = await startReplicas(3, { UPSTREAM_URL: fake.url, REDIS_URL: redis.url });
  }, 60_000);
  afterAll(async () => {
    await stopReplicas(replicas);
    await fake?.close();
    await redis?.stop();
  });

  it('300 concurrent requests for a cold key, spread across the replicas, give exactly 1 upstream request', async () => {
    const path = `/repos/octocat/hello-world?cold=${Date.now()}`;
    const before = fake.stats().total;
    const answers = await Promise.all(
      Array.from({ length: 300 }, async (_, index) => {
        const replica = replicas[index % 3]!;
        const res = await request(replica.url + path);
        // API addresses in the body point at the replica that answered (rewrite_body_urls): compare without them.
        const body = (await res.body.text()).replaceAll(replica.url, 'http://proxy');
        return { status: res.statusCode, body, cacheStatus: String(res.headers['cache-status']) };
      }),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(new Set(answers.map((a) => a.body)).size).toBe(1);
    expect(fake.stats().total - before).toBe(1);
    // Each replica either won the lock, followed the winner through L2, or coalesced locally.
    const locks = (await Promise.all(replicas.map((r) => metric(r.adminUrl, 'etagere_flight_locks_total')))).join('\n');
    expect(locks.match(/result="won"} 1/g)?.length).toBe(1);
  }, 30_000);

  it("a client's own credential is shared across replicas (they agree on a partition secret through Redis)", async () => {
    const alice = { authorization: 'token demo_token_alice_repo' };
    const first = await request(`${replicas[1]!.url}/user`, { headers: alice });
    expect(JSON.parse(await first.body.text()).login).toBe('alice');
    const before = fake.stats().total;
    for (const replica of [replicas[0]!, replicas[2]!]) {
      const res = await request(`${replica.url}/user`, { headers: alice });
      expect(String(res.headers['cache-status'])).toMatch(/^etagere; hit/);
      await res.body.dump();
    }
    expect(fake.stats().total).toBe(before);
    const bob = await request(`${replicas[0]!.url}/user`, { headers: { authorization: 'token demo_token_bob_public' } });
    expect(JSON.parse(await bob.body.text()).login).toBe('bob');
  });

  it('an entry fetched through one replica is a hit on the others', async () => {
    const path = '/users/octocat';
    const first = await request(replicas[0]!.url + path);
    await first.body.dump();
    const before = fake.stats().total;
    for (const replica of replicas.slice(1)) {
      const res = await request(replica.url + path);
      expect(res.statusCode).toBe(200);
      expect(String(res.headers['cache-status'])).toMatch(/^etagere; hit/);
      await res.body.dump();
    }
    expect(fake.stats().total).toBe(before);
  });
});

describe('three replicas share one token budget', () => {
  const TOKENS = ['rep_pool_token_a1', 'rep_pool_token_b2', 'rep_pool_token_c3'];
  let redis: TestRedis;
  let fake: FakeUpstream;
  let replicas: Replica[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({
      tokens: parseTokenSpec(TOKENS.map((t, i) => `${t}@user${i}:public_repo`).join(',')),
      tokenLimit: 50,
      windowSeconds: 600,
    });
    replicas = await startReplicas(3, {
      UPSTREAM_URL: fake.url,
      REDIS_URL: redis.url,
      ETAGERE_TOKENS: TOKENS.map((t, i) => `t${i}=${t}`).join(','),
    });
  }, 60_000);
  afterAll(async () => {
    await stopReplicas(replicas);
    await fake?.close();
    await redis?.stop();
  });

  it('149 uncached requests spread across replicas succeed with no upstream 403/429; request 151 gets 429', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 149; i += 12) {
      const batch = Array.from({ length: Math.min(12, 149 - i) }, async (_, offset) => {
        const requestNumber = i + offset;
        const res = await request(`${replicas[requestNumber % 3]!.url}/repos/octocat/hello-world?n=${requestNumber}`);
        await res.body.dump();
        return res.statusCode;
      });
      statuses.push(...(await Promise.all(batch)));
    }
    expect(statuses.filter((st) => st !== 200)).toEqual([]);
    const r150 = await request(`${replicas[0]!.url}/users/octocat?n=150`);
    await r150.body.dump();
    expect(r150.statusCode).toBe(200);
    const stats = fake.stats();
    expect(stats.byStatus['403']).toBeUndefined();
    expect(stats.byStatus['429']).toBeUndefined();
    expect(stats.quotaSpent).toBe(150);
    for (const rep of replicas) {
      const r151 = await request(`${rep.url}/users/alice?n=151`);
      const body = await r151.body.text();
      expect(r151.statusCode, body).toBe(429);
      expect(Number(r151.headers['retry-after'])).toBeGreaterThan(0);
    }
    expect(fake.stats().byStatus['403']).toBeUndefined();
    // Every replica sees the three (heartbeats every 2 s) and takes a third of the concurrency cap.
    await until(
      async () => {
        const admin = JSON.parse(await (await request(`${replicas[1]!.adminUrl}/admin/tokens`)).body.text()) as {
          budget: string;
          replicas: number;
        };
        return admin.budget === 'shared' && admin.replicas === 3;
      },
      5_000,
      'the heartbeat to count three replicas',
    );
  }, 30_000);
});
