/**
 * The pool's wait queue is bounded per consumer (pool.max_queue split by weight): a consumer that
 * floods misses while every token is busy fills only its own part, gets the usual 503 busy answer
 * beyond it, and another consumer's miss still waits its turn and is served. In process, and with
 * the budget shared through Redis.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { get, type Answer } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const TOKENS = { a: 'pool_secret_token_qbound_aaaa1111', b: 'pool_secret_token_qbound_bbbb2222' };
const FAKE_TOKENS = parseTokenSpec(`${TOKENS.a}@alice:public_repo,${TOKENS.b}@bob:public_repo`);
const KEYS = { greedy: 'consumer_key_greedy_q_7c1e0a', polite: 'consumer_key_polite_q_93bd44', heavy: 'consumer_key_heavy_q_51aa02' };
const SECRETS = [...Object.values(TOKENS), ...Object.values(KEYS)];
const as = (key: string) => ({ 'x-etagere-key': key });

let redis: TestRedis;
const proxies: TestProxy[] = [];
const fakes: FakeUpstream[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterEach(async () => {
  for (const proxy of proxies.splice(0)) {
    const admin = (await get(`${proxy.adminUrl}/metrics`)).body + (await get(`${proxy.adminUrl}/admin/consumers`)).body;
    await proxy.close();
    for (const secret of SECRETS) expect(admin + proxy.logText()).not.toContain(secret);
  }
  for (const fake of fakes.splice(0)) await fake.close();
});
afterAll(async () => {
  await redis?.stop();
});

/** A pool of 2 tokens x 1 slot behind a slow upstream, max_queue 10, consumers greedy and polite (weight 1) and heavy (weight 2). */
async function setup(shared: boolean): Promise<TestProxy> {
  const fake = await startFakeUpstream({ tokens: FAKE_TOKENS, latencyMs: 2_500 });
  fakes.push(fake);
  const proxy = await startTestProxy({
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { policy: 'max-age' } }],
    pool: {
      tokens: [
        { name: 'a', value: TOKENS.a },
        { name: 'b', value: TOKENS.b },
      ],
      per_token_concurrency: 1,
      max_concurrency: 2,
      max_queue: 10,
      queue_timeout_ms: 30_000,
    },
    consumers: {
      enabled: true,
      keys: [
        { name: 'greedy', value: KEYS.greedy },
        { name: 'polite', value: KEYS.polite },
        { name: 'heavy', value: KEYS.heavy, weight: 2 },
      ],
    },
    ...(shared ? { redis: { url: redis.url, key_prefix: `qbound-${Date.now()}:` } } : {}),
  });
  proxies.push(proxy);
  return proxy;
}

async function queueLength(proxy: TestProxy): Promise<number> {
  const text = (await get(`${proxy.adminUrl}/metrics`)).body;
  return Number(/^etagere_pool_queue_length (\d+)/m.exec(text)?.[1] ?? 0);
}

function expectBusy(answer: Answer): void {
  expect(answer.status).toBe(503);
  expect(answer.headers['retry-after']).toBe('1');
  const body = JSON.parse(answer.body) as { message: string; documentation_url: string };
  expect(body.message).toMatch(/busy/);
  expect(body.documentation_url).toMatch(/^https:\/\//);
}

describe.each([
  ['in process', false],
  ['shared through Redis', true],
])('the wait queue bounded per consumer (%s)', (_mode, shared) => {
  it('a consumer flooding misses fills only its own part of the queue; another consumer is still queued and served', async () => {
    const proxy = await setup(shared);
    // max_queue 10 over weights greedy 1 + polite 1 + heavy 2 + unkeyed 1 = 5: greedy may have 2 waiting.
    const flood = Array.from({ length: 30 }, (_, i) => get(`${proxy.url}/repos/etagere-org/repo-001?flood=${i}`, as(KEYS.greedy)));
    // 2 in flight, 2 waiting: the 26 others are refused at once, long before a slot frees up (2.5 s).
    await until(async () => (await queueLength(proxy)) >= 2, 10_000, 'the flood to fill its part of the queue');
    const polite = get(`${proxy.url}/repos/etagere-org/repo-002`, as(KEYS.polite));
    const answers = await Promise.all(flood);
    const politeAnswer = await polite;
    expect(politeAnswer.status).toBe(200);
    const served = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status !== 200);
    expect(served.length).toBe(4); // 2 in flight and 2 waiting: its own part, no more
    for (const answer of refused) expectBusy(answer);
  }, 60_000);

  it('a heavier consumer may queue more, in proportion to its weight', async () => {
    const proxy = await setup(shared);
    // heavy: floor(10 x 2 / 5) = 4 waiting besides the 2 in flight.
    const flood = Array.from({ length: 20 }, (_, i) => get(`${proxy.url}/repos/etagere-org/repo-003?heavy=${i}`, as(KEYS.heavy)));
    await until(async () => (await queueLength(proxy)) >= 4, 10_000, 'the heavy flood to queue');
    const greedy = get(`${proxy.url}/repos/etagere-org/repo-004`, as(KEYS.greedy));
    const answers = await Promise.all(flood);
    expect((await greedy).status).toBe(200);
    expect(answers.filter((a) => a.status === 200).length).toBe(6);
    for (const answer of answers.filter((a) => a.status !== 200)) expectBusy(answer);
  }, 60_000);
});
