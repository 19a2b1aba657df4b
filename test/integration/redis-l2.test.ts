/**
 * The shared (Redis) cache with real Redis processes and the fake GitHub API: replicas share
 * entries through L2, a garbage value is a miss, invalidations reach other replicas' L1, and a
 * Redis that dies or freezes mid-load costs no client error, and no request waits on it for longer
 * than the configured command timeouts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { cacheKey, ANONYMOUS } from '../../src/cache/rules/key.js';
import { ENTRY_VERSION } from '../../src/cache/store/entry-codec.js';
import { keyTag } from '../../src/cache/store/redis-store.js';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { deadPort } from '../helpers/upstream.js';
import { redisKind, startRedis, startRedisCluster, type TestRedis, type TestRedisCluster } from '../helpers/redis.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';

/** Signals need a Redis this test started as a process (not REDIS_URL, not a container). */
const canSignal = (await redisKind()) === 'process';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  ms: number;
  /** performance.now() when the request was sent. */
  sent: number;
}

async function get(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  const started = performance.now();
  const res = await request(url, { headers });
  const body = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body, ms: performance.now() - started, sent: started };
}

const PREFIX = 'etagere-test:';

function replicaConfig(fake: FakeUpstream, redisUrl: string, extra: Record<string, unknown> = {}) {
  return {
    upstreams: [{ name: 'github', prefix: '/', url: fake.url }],
    redis: { url: redisUrl, key_prefix: PREFIX, ...extra },
    cache: { partition_secret: 'shared-secret-of-the-replicas' },
  };
}

describe('Redis L2 shared by replicas', () => {
  let redis: TestRedis;
  let fake: FakeUpstream;
  let replicaA: TestProxy;
  let replicaB: TestProxy;
  let raw: Redis;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    replicaA = await startTestProxy(replicaConfig(fake, redis.url));
    replicaB = await startTestProxy(replicaConfig(fake, redis.url));
    raw = new Redis(redis.url, { maxRetriesPerRequest: 1, retryStrategy: (n) => Math.min(n * 50, 500) });
    await until(() => replicaA.metrics.redisUp.get().then((m) => m.values[0]?.value === 1), 5_000, 'replica a connected');
    await until(() => replicaB.metrics.redisUp.get().then((m) => m.values[0]?.value === 1), 5_000, 'replica b connected');
  });
  afterAll(async () => {
    raw?.disconnect();
    await replicaA?.close();
    await replicaB?.close();
    await fake?.close();
    await redis?.stop();
  });

  it('an entry stored by replica A is served by replica B from L2, with no upstream call', async () => {
    const first = await get(`${replicaA.url}/repos/octocat/hello-world`);
    expect(first.headers['cache-status']).toMatch(/fwd=miss; fwd-status=200; ttl=\d+; stored/);
    const before = fake.stats().total;
    await until(
      async () =>
        (await raw.exists(
          `${PREFIX}v1:{${keyTag(cacheKey({ upstream: 'github', pathname: '/repos/octocat/hello-world', search: '', accept: undefined, apiVersion: undefined, partition: ANONYMOUS }))}}:e`,
        )) === 1,
      2_000,
      'L2 write',
    );
    const fromB = await get(`${replicaB.url}/repos/octocat/hello-world`);
    expect(fromB.status).toBe(200);
    expect(fromB.body).toBe(first.body);
    expect(fromB.headers['cache-status']).toMatch(/^etagere; hit; ttl=\d+/);
    expect(fake.stats().total).toBe(before);
    // Promoted into B's L1: the next hit needs no Redis round trip.
    const l2Before = (await replicaB.metrics.l2Lookups.get()).values.reduce((n, v) => n + v.value, 0);
    await get(`${replicaB.url}/repos/octocat/hello-world`);
    expect((await replicaB.metrics.l2Lookups.get()).values.reduce((n, v) => n + v.value, 0)).toBe(l2Before);
  });

  it('a client credential is shared across replicas only within its own partition', async () => {
    const alice = { authorization: 'token demo_token_alice_repo' };
    await get(`${replicaA.url}/user`, alice);
    const before = fake.stats().total;
    const fromB = await until(
      async () => /hit/.test(String((await get(`${replicaB.url}/user`, alice)).headers['cache-status'])),
      2_000,
      'alice hit on b',
    ).then(() => true);
    expect(fromB).toBe(true);
    expect(fake.stats().total).toBe(before);
    const bob = await get(`${replicaB.url}/user`, { authorization: 'token demo_token_bob_public' });
    expect(JSON.parse(bob.body).login).toBe('bob');
  });

  it('a garbage value in an L2 key is a miss, logged once, never a crash', async () => {
    const path = '/users/carol';
    const key = cacheKey({
      upstream: 'github',
      pathname: path,
      search: '',
      accept: undefined,
      apiVersion: undefined,
      partition: ANONYMOUS,
    });
    const redisKey = `${PREFIX}v1:{${keyTag(key)}}:e`;
    const stampedHuge = Buffer.from([ENTRY_VERSION, 1, 2, 3, 4, 5, 6, 255, 255, 255, 255, 123, 125]); // this version's head, a huge length
    const stampedShort = Buffer.from([ENTRY_VERSION, 1, 2, 3, 4, 5, 6, 0, 0]); // cut inside its head
    for (const garbage of [
      Buffer.from('not an entry'),
      Buffer.from([1, 0, 0, 0, 9, 123]),
      Buffer.from([1, 255, 255, 255, 255]),
      stampedHuge,
      stampedShort,
    ]) {
      await raw.set(redisKey, garbage, 'PX', 60_000);
      const answer = await get(`${replicaB.url}${path}?g=${garbage.length}`);
      expect(answer.status).toBe(200);
      const direct = await get(`${replicaB.url}${path}`, { 'cache-control': 'no-cache' });
      expect(JSON.parse(direct.body).login).toBe('carol');
    }
    const corrupt = (await replicaB.metrics.l2Lookups.get()).values.find((v) => v.labels.result === 'corrupt');
    expect(corrupt?.value).toBeGreaterThanOrEqual(1);
    expect(replicaB.logs().filter((l) => String(l.msg).includes('does not decode')).length).toBe(1);
  });

  it('a change stored by one replica drops the older L1 copy in the other', async () => {
    const path = '/repos/octocat/spoon-knife';
    const v1 = await get(`${replicaA.url}${path}`);
    await until(async () => /hit/.test(String((await get(`${replicaB.url}${path}`)).headers['cache-status'])), 2_000, 'b holds it');
    const mutation = await request(`${fake.url}/__fake/mutate`, { method: 'POST', body: JSON.stringify({ path }) });
    await mutation.body.dump();
    const v2 = await get(`${replicaA.url}${path}`, { 'cache-control': 'max-age=0' });
    expect(v2.body).not.toBe(v1.body);
    // B's L1 copy was dropped by the notice; B now serves the new body from L2 (no upstream call).
    const before = fake.stats().total;
    await until(async () => (await get(`${replicaB.url}${path}`)).body === v2.body, 2_000, 'b to serve the new body');
    expect(fake.stats().total).toBe(before);
  });
});

describe('a replica with L1 off (every hit reads L2)', () => {
  let redis: TestRedis;
  let fake: FakeUpstream;
  let writer: TestProxy;
  let reader: TestProxy;
  let raw: Redis;
  const l2Hits = async (): Promise<number> =>
    (await reader.metrics.l2Lookups.get()).values.find((v) => v.labels.result === 'hit')?.value ?? 0;
  const redisKeyOf = (pathname: string): string =>
    `${PREFIX}v1:{${keyTag(cacheKey({ upstream: 'github', pathname, search: '', accept: undefined, apiVersion: undefined, partition: ANONYMOUS }))}}:e`;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    writer = await startTestProxy(replicaConfig(fake, redis.url));
    const base = replicaConfig(fake, redis.url);
    reader = await startTestProxy({ ...base, cache: { ...base.cache, l1: false } });
    raw = new Redis(redis.url, { maxRetriesPerRequest: 1, retryStrategy: (n) => Math.min(n * 50, 500) });
    await until(() => writer.metrics.redisUp.get().then((m) => m.values[0]?.value === 1), 5_000, 'writer connected');
    await until(() => reader.metrics.redisUp.get().then((m) => m.values[0]?.value === 1), 5_000, 'reader connected');
  });
  afterAll(async () => {
    raw?.disconnect();
    await writer?.close();
    await reader?.close();
    await fake?.close();
    await redis?.stop();
  });

  it('serves every hit from L2, and a change another replica stored at once, with no upstream call', async () => {
    const path = '/repos/octocat/spoon-knife';
    const v1 = await get(`${writer.url}${path}`);
    await until(async () => (await raw.exists(redisKeyOf(path))) === 1, 2_000, 'L2 write');
    const before = fake.stats().total;
    const hitsBefore = await l2Hits();
    for (let round = 0; round < 3; round++) {
      const hit = await get(`${reader.url}${path}`);
      expect(hit.headers['cache-status']).toMatch(/^etagere; hit; ttl=\d+/);
      expect(hit.body).toBe(v1.body);
    }
    expect((await l2Hits()) - hitsBefore).toBe(3);
    const mutation = await request(`${fake.url}/__fake/mutate`, { method: 'POST', body: JSON.stringify({ path }) });
    await mutation.body.dump();
    const v2 = await get(`${writer.url}${path}`, { 'cache-control': 'max-age=0' });
    expect(v2.body).not.toBe(v1.body);
    const afterChange = fake.stats().total;
    await until(async () => (await get(`${reader.url}${path}`)).body === v2.body, 2_000, 'the reader to serve the new body');
    expect((await get(`${reader.url}${path}`)).body).toBe(v2.body);
    expect(fake.stats().total).toBe(afterChange);
    expect(afterChange).toBeGreaterThan(before);
  });

  it('reads garbage written over a value it has served as a miss, and answers from the upstream', async () => {
    const path = '/users/octocat';
    const first = await get(`${writer.url}${path}`);
    await until(async () => (await raw.exists(redisKeyOf(path))) === 1, 2_000, 'L2 write');
    expect((await get(`${reader.url}${path}`)).headers['cache-status']).toMatch(/^etagere; hit/);
    const value = await raw.getBuffer(redisKeyOf(path));
    // The same write stamp, the rest garbled (same length, then truncated): never the entry served before.
    const garbled = Buffer.from(value!);
    garbled.fill(0x7b, 7);
    for (const garbage of [garbled, value!.subarray(0, 20)]) {
      await raw.set(redisKeyOf(path), garbage, 'PX', 60_000);
      const before = fake.stats().total;
      const answer = await get(`${reader.url}${path}`);
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body).login).toBe(JSON.parse(first.body).login);
      expect(answer.headers['cache-status']).toMatch(/fwd=miss/);
      expect(fake.stats().total).toBe(before + 1);
    }
  });
});

describe('Redis outages', () => {
  /** The proxy's Redis settings (the defaults, stated): the bounds below follow from them. */
  const SETTINGS = { command_timeout_ms: 100, lookup_timeout_ms: 20, breaker_failures: 3, breaker_open_ms: 1_000 } as const;
  /**
   * What a request may take beside its waits on Redis. Fixed, not measured: twice the margin of
   * test/hardening/redis-faults.test.ts, since client, proxy and upstream share this one process
   * and this file runs beside others. A wait on the 1 s command backstop still fails it.
   */
  const MARGIN_MS = 200;
  /** A request waits on Redis at most for its L2 lookup and its single-flight lock, each at most command_timeout_ms. */
  const IN_FLIGHT_BOUND_MS = 2 * SETTINGS.command_timeout_ms + MARGIN_MS;

  let redis: TestRedis;
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    proxy = await startTestProxy(replicaConfig(fake, redis.url, SETTINGS));
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
    await redis?.stop();
  });

  const up = async (): Promise<boolean> => (await proxy.metrics.redisUp.get()).values[0]?.value === 1;
  const ops = async (result: RegExp, op: RegExp = /./): Promise<number> =>
    (await proxy.metrics.redisOps.get()).values
      .filter((v) => result.test(String(v.labels.result)) && op.test(String(v.labels.op)))
      .reduce((sum, v) => sum + v.value, 0);
  const opsOk = (op: string): Promise<number> => ops(/^ok$/, new RegExp(`^${op}$`));

  /** Numbers the load's requests across the tests: a new key is new to this proxy's L1 too. */
  let nextIndex = 0;

  interface LoadAnswer extends Answer {
    /** A new key: the request looks it up in L2 (the others are L1 hits). */
    looksUp: boolean;
  }

  /**
   * 8 clients, 200 requests a second between them: two thirds new keys (L2 read, upstream, L2
   * write), one third a hot key (L1 hit). The load is paced, not as fast as the clients can go:
   * with client, proxy and upstream in this one process, a closed loop measures how long a request
   * queues behind the seven others.
   */
  async function load(during: () => Promise<void>): Promise<LoadAnswer[]> {
    const answers: LoadAnswer[] = [];
    let stop = false;
    const period = (8 * 1000) / 200;
    const worker = async (_: unknown, slot: number): Promise<void> => {
      let next = performance.now() + (slot * period) / 8;
      while (!stop) {
        // Pacing the load (each client's next send time), not waiting for an event.
        const wait = next - performance.now();
        if (wait > 0) await settle(wait);
        next += period;
        const index = nextIndex++;
        const looksUp = index % 3 !== 0;
        const path = looksUp ? `/repos/etagere-org/repo-0${String(10 + (index % 60))}?outage=${index}` : '/repos/octocat/hello-world';
        answers.push({ ...(await get(proxy.url + path)), looksUp });
      }
    };
    const workers = Array.from({ length: 8 }, worker);
    try {
      await until(async () => answers.length >= 100, 10_000, 'half a second of steady load first');
      await during();
    } finally {
      stop = true;
      await Promise.all(workers);
    }
    return answers;
  }

  const settle = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

  /** The part of an outage during which the proxy reports Redis down, and what it sent to Redis meanwhile. */
  interface DownWindow {
    /** When the proxy reported Redis down (performance.now()). */
    seen: number;
    from: number;
    to: number;
    /** Commands sent to Redis (answered or not), and L2 lookups that skipped it, from `from` to `to`. */
    sent: number;
    skipped: number;
    /** How long the counts cover. */
    countedMs: number;
  }

  /**
   * Waits until the proxy reports Redis down (disconnected or its breaker open), lets every command
   * sent before that time out (command_timeout_ms and the margin: a duration of the configuration,
   * spent while the outage is held anyway), then counts what the proxy sends to Redis until `end`.
   */
  async function whileDown(end: () => Promise<void>): Promise<DownWindow> {
    await until(() => proxy.redisUp() === false, 5_000, 'the proxy to report Redis down');
    const seen = performance.now();
    await settle(SETTINGS.command_timeout_ms + MARGIN_MS);
    const countFrom = performance.now();
    const [sent0, skipped0] = [await ops(/^(ok|error)$/), await ops(/^skipped$/, /^get$/)];
    const from = performance.now();
    await end();
    const to = performance.now();
    const [sent, skipped] = [(await ops(/^(ok|error)$/)) - sent0, (await ops(/^skipped$/, /^get$/)) - skipped0];
    return { seen, from, to, sent, skipped, countedMs: performance.now() - countFrom };
  }

  /**
   * The outage's properties, with bounds from the settings above, never from a latency measured
   * here: no client error; the proxy sees the outage, and each request in flight at it finishes,
   * within IN_FLIGHT_BOUND_MS; once the proxy reports Redis down, no request waits on it: the
   * commands it still sends are at most the breaker's trials (one per breaker_open_ms), and every
   * other L2 lookup skips Redis.
   */
  function expectOutage(answers: LoadAnswer[], failedAt: number, down: DownWindow): void {
    expect(answers.filter((x) => x.status !== 200).map((x) => x.status)).toEqual([]);
    expect(down.seen - failedAt, 'ms until the proxy reported Redis down').toBeLessThan(IN_FLIGHT_BOUND_MS);
    const inFlight = answers.filter((x) => x.sent < down.seen && x.sent + x.ms >= failedAt).map((x) => x.ms);
    expect(Math.max(0, ...inFlight), 'ms taken by the slowest request in flight at the outage').toBeLessThan(IN_FLIGHT_BOUND_MS);
    const trials = 1 + Math.floor(down.countedMs / SETTINGS.breaker_open_ms);
    // Sent early enough in the window for the lookup to be made in it.
    const lookups = answers.filter((x) => x.looksUp && x.sent >= down.from && x.sent <= down.to - MARGIN_MS).length;
    expect(lookups, 'requests with an L2 lookup while the proxy reported Redis down').toBeGreaterThan(20);
    expect(down.sent, 'commands sent to Redis while the proxy reported it down').toBeLessThanOrEqual(trials);
    expect(down.skipped, 'L2 lookups made without Redis then').toBeGreaterThanOrEqual(lookups - trials);
  }

  /** After Redis is back: L2 reads and writes succeed again within 2 s. */
  async function resumesWithin2s(): Promise<void> {
    const back = Date.now();
    const [gets, sets] = [await opsOk('get'), await opsOk('set')];
    await until(async () => (await opsOk('get')) > gets && (await opsOk('set')) > sets, 2_000, 'L2 reads and writes to resume');
    expect(Date.now() - back).toBeLessThan(2_000);
  }

  it.skipIf(!canSignal)(
    'Redis killed mid-load, then restarted: no client error, no request waits on the dead Redis, L2 back within 2 s',
    async () => {
      await until(up, 5_000, 'redis up');
      let failedAt = 0;
      let down: DownWindow | undefined;
      const answers = await load(async () => {
        failedAt = performance.now();
        redis.signal('SIGKILL');
        // Held 800 ms: the outage lasts while the load goes on (not synchronisation).
        down = await whileDown(() => settle(Math.max(0, failedAt + 800 - performance.now())));
        await redis.restart();
        await resumesWithin2s();
      });
      expectOutage(answers, failedAt, down!);
    },
    30_000,
  );

  it.skipIf(!canSignal)(
    'Redis frozen (SIGSTOP) mid-load: no client error, no request waits on the frozen Redis, L2 back within 2 s of SIGCONT',
    async () => {
      await until(up, 5_000, 'redis up');
      let failedAt = 0;
      let down: DownWindow | undefined;
      const answers = await load(async () => {
        failedAt = performance.now();
        redis.signal('SIGSTOP');
        try {
          // Held 1.5 s: the outage lasts while the load goes on (not synchronisation).
          down = await whileDown(() => settle(Math.max(0, failedAt + 1_500 - performance.now())));
        } finally {
          redis.signal('SIGCONT');
        }
        await resumesWithin2s();
      });
      expectOutage(answers, failedAt, down!);
    },
    30_000,
  );
});

describe('on a 3-node Redis Cluster', () => {
  let cluster: TestRedisCluster;
  let fake: FakeUpstream;
  let replicaA: TestProxy;
  let replicaB: TestProxy;
  const TOKENS = ['cluster_pool_token_1', 'cluster_pool_token_2'];

  beforeAll(async () => {
    cluster = await startRedisCluster();
    fake = await startFakeUpstream({ tokens: parseTokenSpec(TOKENS.map((t, i) => `${t}@u${i}:public_repo`).join(',')), tokenLimit: 20 });
    const config = () => ({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
      redis: { cluster: cluster.nodes.map((n) => `${n.host}:${n.port}`), key_prefix: PREFIX },
      cache: { partition_secret: 'shared-secret-of-the-replicas' },
      pool: { tokens: TOKENS.map((value, i) => ({ name: `c${i}`, value })) },
    });
    replicaA = await startTestProxy(config());
    replicaB = await startTestProxy(config());
    for (const replica of [replicaA, replicaB])
      await until(async () => (await replica.metrics.redisUp.get()).values[0]?.value === 1, 10_000, 'cluster connection');
  }, 60_000);
  afterAll(async () => {
    await replicaA?.close();
    await replicaB?.close();
    await fake?.close();
    await cluster?.stop();
  });

  it('shares entries across replicas, with one upstream request for concurrent cold misses', async () => {
    const paths = ['/repos/octocat/hello-world', '/users/octocat', '/users/alice', '/orgs/etagere-org/repos?per_page=5'];
    for (const path of paths) {
      const before = fake.stats().total;
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => get((i % 2 === 0 ? replicaA : replicaB).url + path)));
      expect(answers.every((x) => x.status === 200)).toBe(true);
      expect(fake.stats().total - before).toBe(1);
    }
    // An entry written through A (a new key) is then a hit on B with no upstream call.
    await get(`${replicaA.url}/users/bob`);
    const before = fake.stats().total;
    await until(async () => /hit/.test(String((await get(`${replicaB.url}/users/bob`)).headers['cache-status'])), 3_000, 'b to hit');
    expect(fake.stats().total).toBe(before);
  });

  it('spends the shared token budget to the last unit with no upstream 403/429', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 60 && !statuses.includes(429); i++) {
      const answer = await get(`${(i % 2 === 0 ? replicaA : replicaB).url}/repos/octocat/hello-world?budget=${i}`);
      statuses.push(answer.status);
    }
    expect(statuses.indexOf(429)).toBeGreaterThanOrEqual(40 - 5); // 2 x 20 minus what the first test spent
    expect(fake.stats().quotaSpent).toBe(40);
    expect(fake.stats().byStatus['403']).toBeUndefined();
    expect(fake.stats().byStatus['429']).toBeUndefined();
  });
});

describe('readiness without Redis', () => {
  it('stays ready and serves when Redis is unreachable, unless the config says Redis is required', async () => {
    const fake = await startFakeUpstream({});
    const nowhere = `redis://127.0.0.1:${await deadPort()}`;
    const optional = await startTestProxy(replicaConfig(fake, nowhere));
    const required = await startTestProxy(replicaConfig(fake, nowhere, { required: true }));
    try {
      expect((await get(`${optional.adminUrl}/readyz`)).status).toBe(200);
      expect((await get(`${required.adminUrl}/readyz`)).status).toBe(503);
      const answer = await get(`${optional.url}/users/octocat`);
      expect(answer.status).toBe(200);
      expect((await get(`${optional.url}/users/octocat`)).headers['cache-status']).toMatch(/^etagere; hit/);
      expect((await optional.metrics.redisUp.get()).values[0]?.value).toBe(0);
    } finally {
      await optional.close();
      await required.close();
      await fake.close();
    }
  });
});
