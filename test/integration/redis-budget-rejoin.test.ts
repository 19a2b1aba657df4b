/**
 * The shared token budget after Redis comes back: each replica rejoins it within 2 s of Redis
 * answering, with no request arriving, and /admin/tokens never shows a replica's local allowance
 * (its 1/N part during the outage) as spent quota. A real redis-server child, killed and started
 * again on the same port, empty (no persistence): the replicas give Redis back what they know.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { get } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { redisKind, startRedis, type TestRedis } from '../helpers/redis.js';

const TOKENS = { a: 'rejoin_pool_token_aaaa_4e1c07', b: 'rejoin_pool_token_bbbb_9d2f18' };
const canSignal = (await redisKind()) === 'process';

interface TokenRow {
  name: string;
  remaining: number | null;
  limit: number | null;
  local_allowance: number | null;
  resources: Record<string, { remaining: number; local_allowance?: number }>;
}
interface TokensView {
  budget: string | null;
  replicas: number;
  tokens: TokenRow[];
}

async function tokensOf(proxy: TestProxy): Promise<TokensView> {
  return JSON.parse((await get(`${proxy.adminUrl}/admin/tokens`)).body) as TokensView;
}

const remainingOf = (view: TokensView): Record<string, number | null> => Object.fromEntries(view.tokens.map((t) => [t.name, t.remaining]));

describe.skipIf(!canSignal)('the shared token budget after Redis restarts', () => {
  let redis: TestRedis;
  let fake: FakeUpstream;
  let client: Redis;
  const replicas: TestProxy[] = [];
  const prefix = `rejoin-${Date.now()}:`;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({
      tokens: parseTokenSpec(`${TOKENS.a}@alice:public_repo,${TOKENS.b}@bob:public_repo`),
      tokenLimit: 100,
    });
    for (let i = 0; i < 2; i++) {
      replicas.push(
        await startTestProxy({
          upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
          pool: {
            tokens: [
              { name: 'a', value: TOKENS.a },
              { name: 'b', value: TOKENS.b },
            ],
          },
          redis: { url: redis.url, key_prefix: prefix },
        }),
      );
    }
  });
  afterAll(async () => {
    client?.disconnect();
    for (const proxy of replicas) {
      const text = JSON.stringify(await tokensOf(proxy)) + proxy.logText();
      await proxy.close();
      for (const secret of Object.values(TOKENS)) expect(text).not.toContain(secret);
    }
    await fake?.close();
    await redis?.stop();
  });

  it('each replica is shared again within 2 s of Redis answering, without traffic, and never shows its allowance as spent', async () => {
    const [first, second] = replicas as [TestProxy, TestProxy];
    await until(async () => (await tokensOf(first)).replicas === 2 && (await tokensOf(second)).replicas === 2, 10_000, 'two replicas');
    // Spend some quota through one replica, so both know numbers that are not the full limit.
    for (let i = 0; i < 6; i++) expect((await get(`${first.url}/repos/etagere-org/repo-001?spent=${i}`)).status).toBe(200);
    // What the upstream itself says is left (GET /rate_limit is free).
    const truth: Record<string, number> = {};
    for (const [name, value] of Object.entries(TOKENS)) {
      const answer = await get(`${fake.url}/rate_limit`, { authorization: `token ${value}` });
      truth[name] = (JSON.parse(answer.body) as { resources: { core: { remaining: number } } }).resources.core.remaining;
    }
    expect(Object.values(truth).reduce((sum, left) => sum + left, 0)).toBe(200 - 6);
    await until(
      async () => JSON.stringify(remainingOf(await tokensOf(second))) === JSON.stringify(truth),
      5_000,
      'the other replica to see the spent quota through Redis',
    );
    expect(remainingOf(await tokensOf(first))).toEqual(truth);

    redis.signal('SIGKILL');
    await until(
      async () => (await tokensOf(first)).budget === 'local' && (await tokensOf(second)).budget === 'local',
      5_000,
      'both replicas to fall back to their local allowance',
    );
    for (const proxy of replicas) {
      const view = await tokensOf(proxy);
      // The upstream's numbers stay as they were; the 1/N part this replica may spend alone is beside them.
      expect(remainingOf(view)).toEqual(truth);
      for (const row of view.tokens) {
        expect(row.local_allowance).toBe(Math.floor(row.remaining! / 2));
        expect(row.resources.core?.local_allowance).toBe(row.local_allowance);
      }
      // The status page's figures (/admin/status) are the same rows.
      const status = JSON.parse((await get(`${proxy.adminUrl}/admin/status`)).body) as TokensView;
      expect(remainingOf(status)).toEqual(truth);
    }

    await redis.restart(); // resolves once redis-server answers PING: an empty Redis, on the same port
    const back = performance.now();
    await until(
      async () => (await tokensOf(first)).budget === 'shared' && (await tokensOf(second)).budget === 'shared',
      10_000,
      'both replicas to be shared through Redis again',
    );
    const rejoinedMs = performance.now() - back;
    expect(rejoinedMs).toBeLessThan(2_000);

    for (const proxy of replicas) {
      const view = await tokensOf(proxy);
      expect(remainingOf(view)).toEqual(truth); // not halved
      for (const row of view.tokens) {
        expect(row.local_allowance).toBeNull();
        expect(row.resources.core?.local_allowance).toBeUndefined();
      }
    }
    // Redis came back empty: it learnt the numbers back from the replicas, not as an unseen token's.
    client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    await until(
      async () => (await client.hget(`${prefix}v1:{pool}:t:a`, 'core:remaining')) === String(truth.a),
      2_000,
      "Redis to hold the tokens' numbers again",
    );
    expect(await client.hget(`${prefix}v1:{pool}:t:b`, 'core:remaining')).toBe(String(truth.b));
    expect(fake.stats().byStatus['403']).toBeUndefined();
  }, 60_000);

  it('a frozen Redis (accepting connections, answering nothing) keeps both replicas on their allowance until it answers again', async () => {
    await until(
      async () => (await tokensOf(replicas[0]!)).budget === 'shared' && (await tokensOf(replicas[1]!)).budget === 'shared',
      10_000,
      'both replicas shared',
    );
    const before = remainingOf(await tokensOf(replicas[0]!));
    redis.signal('SIGSTOP');
    try {
      await until(
        async () => (await tokensOf(replicas[0]!)).budget === 'local' && (await tokensOf(replicas[1]!)).budget === 'local',
        10_000,
        'both replicas to fall back while Redis is frozen',
      );
      // Several rejoin probes meet the frozen Redis: none of them takes it for an answer.
      const metrics = async (): Promise<number> => {
        const text = (await get(`${replicas[0]!.adminUrl}/metrics`)).body;
        return Number(/^etagere_redis_operations_total\{op="heartbeat",result="error"\} (\d+)/m.exec(text)?.[1] ?? 0);
      };
      const failed = await metrics();
      await until(async () => (await metrics()) >= failed + 2, 10_000, 'two more heartbeats to fail on the frozen Redis');
      for (const proxy of replicas) {
        const view = await tokensOf(proxy);
        expect(view.budget).toBe('local');
        expect(remainingOf(view)).toEqual(before);
      }
    } finally {
      redis.signal('SIGCONT');
    }
    const back = performance.now();
    await until(
      async () => (await tokensOf(replicas[0]!)).budget === 'shared' && (await tokensOf(replicas[1]!)).budget === 'shared',
      10_000,
      'both replicas shared again after SIGCONT',
    );
    expect(performance.now() - back).toBeLessThan(2_000);
    for (const proxy of replicas) expect(remainingOf(await tokensOf(proxy))).toEqual(before);
  }, 60_000);
});

describe.skipIf(!canSignal)('the consumer shares after Redis restarts', () => {
  let redis: TestRedis;
  let fake: FakeUpstream;
  const replicas: TestProxy[] = [];
  const KEY = 'rejoin_consumer_key_7f30aa';

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({ tokens: parseTokenSpec(`${TOKENS.a}@alice:public_repo`) });
    for (let i = 0; i < 2; i++) {
      replicas.push(
        await startTestProxy({
          upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
          pool: { tokens: [{ name: 'a', value: TOKENS.a }] },
          consumers: { enabled: true, keys: [{ name: 'web', value: KEY }] },
          redis: { url: redis.url, key_prefix: `rejoin-consumers-${Date.now()}:` },
        }),
      );
    }
  });
  afterAll(async () => {
    for (const proxy of replicas) {
      const text = (await get(`${proxy.adminUrl}/admin/consumers`)).body + proxy.logText();
      await proxy.close();
      for (const secret of [TOKENS.a, KEY]) expect(text).not.toContain(secret);
    }
    await fake?.close();
    await redis?.stop();
  });

  const budgets = async (): Promise<string[]> =>
    Promise.all(
      replicas.map(async (proxy) => (JSON.parse((await get(`${proxy.adminUrl}/admin/consumers`)).body) as { budget: string }).budget),
    );

  it('each replica counts through Redis again within 2 s of Redis answering, without a request', async () => {
    expect(await budgets()).toEqual(['shared', 'shared']);
    redis.signal('SIGKILL');
    // A request on each replica during the outage: each counts its consumer's unit alone.
    for (const [nth, proxy] of replicas.entries())
      expect((await get(`${proxy.url}/repos/etagere-org/repo-001?outage=${nth}`, { 'x-etagere-key': KEY })).status).toBe(200);
    expect(await budgets()).toEqual(['fallback', 'fallback']);
    await redis.restart();
    const back = performance.now();
    await until(async () => (await budgets()).every((mode) => mode === 'shared'), 10_000, 'both replicas to count through Redis again');
    expect(performance.now() - back).toBeLessThan(2_000);
  }, 60_000);
});
