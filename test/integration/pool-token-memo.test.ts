/**
 * Against the fake GitHub API: a pool of 50 tokens that are not equivalent
 * (a cache partition per token). A hit is answered from the token whose entry was stored last
 * (one L1 probe: src/cache/store/token-memo.ts); a token removed from the pool by a tokens file reload
 * never has its entry served again, though the entry is still in L1; the request goes upstream on
 * a member instead, and its entry is the one served from then on.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveSecrets } from '../../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { get, type Answer } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { testSecret } from '../helpers/secrets.js';
import { counterSum } from '../helpers/metrics-text.js';

const NAMES = Array.from({ length: 50 }, (_, index) => `m${String(index + 1).padStart(2, '0')}`);
const TOKENS = new Map(NAMES.map((name) => [name, testSecret(`token-memo pool token ${name}`, `token_memo_pool_${name}_7c1e9a`)]));
const FAKE_TOKENS = parseTokenSpec(NAMES.map((name) => `${TOKENS.get(name)!}@user-${name}:public_repo`).join(','));

const dir = mkdtempSync(join(tmpdir(), 'etagere-token-memo-'));
const file = join(dir, 'tokens');
const writeMembers = (names: readonly string[]): void =>
  writeFileSync(file, `# pool tokens\n${names.map((name) => `${name}=${TOKENS.get(name)!}`).join('\n')}\n`);

const CONSUMER_KEY = testSecret('token-memo consumer key', 'token_memo_consumer_key_3b8d');

let fake: FakeUpstream | undefined;
let proxy: TestProxy | undefined;
let allOn: TestProxy | undefined;
let redis: TestRedis | undefined;
afterAll(async () => {
  await proxy?.close();
  await allOn?.close();
  await fake?.close();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Redis commands so far by operation, leaving out the pool's timer-driven ones (its shared budget's heartbeat and reads). */
async function redisCommands(app: TestProxy): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const value of (await app.metrics.redisOps.get()).values) {
    const op = String(value.labels.op);
    if (op !== 'heartbeat' && op !== 'read' && op !== 'members') out[`${op} ${String(value.labels.result)}`] = value.value;
  }
  return out;
}

const tokenOf = (answer: Answer): string => String(answer.headers['x-etagere-token']);
const statusOf = (answer: Answer): string => String(answer.headers['cache-status']);

describe('a pool of 50 tokens that are not equivalent', () => {
  it('hits come from the token that stored the entry; a removed token is never served, and the entry fetched instead is', async () => {
    fake = await startFakeUpstream({ tokens: FAKE_TOKENS });
    writeMembers(NAMES);
    proxy = await startTestProxy(
      resolveSecrets(
        {
          upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { policy: 'max-age' } }],
          pool: { tokens_file: file, equivalent: false },
        },
        {},
      ),
    );
    const url = `${proxy.url}/repos/octocat/hello-world`;
    const first = await get(url);
    expect(first.status).toBe(200);
    expect(statusOf(first)).toMatch(/fwd=miss/);
    const stored = tokenOf(first);
    expect(NAMES).toContain(stored);
    for (let round = 0; round < 5; round++) {
      const hit = await get(url);
      expect(statusOf(hit)).toMatch(/^etagere; hit/);
      expect(tokenOf(hit)).toBe(stored);
      expect(hit.body).toBe(first.body);
    }
    const metrics = await get(`${proxy.adminUrl}/metrics`);
    expect(metrics.body).toMatch(/etagere_cache_bytes\{tier="token_memo"\} [1-9]/);

    // The token that stored the entry leaves the pool: its partition is not served any more.
    writeMembers(NAMES.filter((name) => name !== stored));
    await proxy.reloadTokens('signal');
    expect(proxy.tokens().map((token) => token.name)).not.toContain(stored);
    const after = await get(url);
    expect(after.status).toBe(200);
    expect(statusOf(after)).toMatch(/fwd=miss/);
    const replacement = tokenOf(after);
    expect(replacement).not.toBe(stored);
    const next = await get(url);
    expect(statusOf(next)).toMatch(/^etagere; hit/);
    expect(tokenOf(next)).toBe(replacement);

    // Hostile: the removed token comes back (its old entry still fresh in L1): the newest entry is what is served.
    writeMembers(NAMES);
    await proxy.reloadTokens('signal');
    expect(proxy.tokens().map((token) => token.name)).toContain(stored);
    const back = await get(url);
    expect(statusOf(back)).toMatch(/^etagere; hit/);
    expect(tokenOf(back)).toBe(replacement);
  });

  it('all on (Redis, 50 tokens, consumer keys): an L1 hit sends Redis nothing', async () => {
    fake ??= await startFakeUpstream({ tokens: FAKE_TOKENS });
    redis = await startRedis();
    writeMembers(NAMES);
    allOn = await startTestProxy(
      resolveSecrets(
        {
          upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { policy: 'max-age' } }],
          pool: { tokens_file: file, equivalent: false },
          consumers: { enabled: true, keys: [{ name: 'web', value: CONSUMER_KEY }] },
          redis: { url: redis.url, key_prefix: 'etagere-token-memo:', required: true },
        },
        {},
      ),
    );
    const url = `${allOn.url}/users/octocat`;
    const key = { 'x-etagere-key': CONSUMER_KEY };
    expect(statusOf(await get(url, key))).toMatch(/fwd=miss/);
    expect(statusOf(await get(url, key))).toMatch(/^etagere; hit/);
    // Hostile: a wrong key is refused, and costs no Redis command either.
    expect((await get(url, { 'x-etagere-key': `${CONSUMER_KEY}x` })).status).toBe(401);
    // The miss's L2 write is done once its notice to the other replicas is out.
    await until(async () => ((await redisCommands(allOn!))['publish ok'] ?? 0) >= 1, 5_000, 'the L2 write and its notice');
    const before = await redisCommands(allOn);
    for (let round = 0; round < 30; round++) expect(statusOf(await get(url, key))).toMatch(/^etagere; hit/);
    expect((await get(url, { 'x-etagere-key': 'not-a-key' })).status).toBe(401);
    expect(await redisCommands(allOn)).toEqual(before);
    const metrics = (await get(`${allOn.adminUrl}/metrics`)).body;
    expect(counterSum(metrics, 'etagere_consumer_hits_total', { consumer: 'web' })).toBe(31);
    expect(counterSum(metrics, 'etagere_consumer_requests_total', { consumer: 'web' })).toBe(32);
  });
});
