/**
 * GitHub Enterprise Server with rate limiting off, its default: the fake under
 * `/api/v3` with `rateLimits: false` answers GET /rate_limit with 404 "Rate limiting is not
 * enabled." and sends no x-ratelimit-*. Through the proxy: the probe takes both pool tokens as
 * alive and unlimited, pooled requests spread over them by load, no x-ratelimit-* (never zeros)
 * reach the client, the pool's own GET /rate_limit is GHES's 404, and a token the upstream refused
 * (401) comes back once it is accepted again. The same with the pool shared through Redis, where a
 * second replica learns "unlimited" from the shared budget. Hostile: an upstream whose rate-limit
 * headers are garbage.
 */
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { expectAllThroughProxy } from '../helpers/clients.js';
import { get, post, type Answer } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const TOKENS = { one: 'ghes_nolimit_token_one', two: 'ghes_nolimit_token_two' };
const POOL_LOGINS = ['bob', 'carol'];
const POOL = {
  tokens: [
    { name: 'one', value: TOKENS.one },
    { name: 'two', value: TOKENS.two },
  ],
  revive_interval_ms: 200,
};

interface TokenRow {
  name: string;
  state: string;
  unlimited: boolean;
  limit: number | null;
  remaining: number | null;
}

async function tokenRows(proxy: TestProxy): Promise<TokenRow[]> {
  return (JSON.parse((await get(`${proxy.adminUrl}/admin/tokens`)).body) as { tokens: TokenRow[] }).tokens;
}

function rateLimitHeaders(answer: Answer): string[] {
  return Object.keys(answer.headers).filter((name) => name.startsWith('x-ratelimit-'));
}

async function revoke(fake: FakeUpstream, token: string, revoked: boolean): Promise<void> {
  await post(`${fake.url}/__fake/tokens`, { token, revoked });
}

/** What every proxy in front of GHES without rate limits shows, shared pool or not. */
function behavesUnlimited(label: string, setup: () => { fake: FakeUpstream; proxy: TestProxy }): void {
  describe(label, () => {
    it('the probe takes both tokens as alive and unlimited: no numbers, state ok', async () => {
      const { proxy } = setup();
      await until(async () => (await tokenRows(proxy)).every((row) => row.unlimited), 10_000, 'the probe');
      expect((await tokenRows(proxy)).map((row) => [row.name, row.state, row.unlimited, row.limit, row.remaining])).toEqual([
        ['one', 'ok', true, null, null],
        ['two', 'ok', true, null, null],
      ]);
    });

    it('pooled requests spread over both tokens by load; no x-ratelimit-* reaches the client, never zeros', async () => {
      const { fake, proxy } = setup();
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, page) => get(`${proxy.url}/orgs/etagere-org/repos?per_page=5&page=${page + 1}`)),
      );
      for (const answer of answers) {
        expect(answer.status).toBe(200);
        expect(rateLimitHeaders(answer)).toEqual([]);
      }
      expect(new Set(answers.map((answer) => answer.headers['x-etagere-token']))).toEqual(new Set(['one', 'two']));
      // Cached answers (a hit) carry none either.
      const hit = await get(`${proxy.url}/orgs/etagere-org/repos?per_page=5&page=1`);
      expect(hit.status).toBe(200);
      expect(rateLimitHeaders(hit)).toEqual([]);
      expectAllThroughProxy(fake, POOL_LOGINS);
    });

    it("the pool's GET /rate_limit is GHES's own 404, answered without asking the upstream", async () => {
      const { fake, proxy } = setup();
      const before = fake.stats().byPath['/rate_limit'] ?? 0;
      const answer = await get(`${proxy.url}/rate_limit`);
      expect(answer.status).toBe(404);
      expect(JSON.parse(answer.body)).toEqual({
        message: 'Rate limiting is not enabled.',
        documentation_url: expect.stringMatching(/^https:\/\/docs\.github\.com\//) as string,
      });
      expect(rateLimitHeaders(answer)).toEqual([]);
      expect(fake.stats().byPath['/rate_limit'] ?? 0).toBe(before);
    });

    it('a token the upstream refuses (401) dies, requests go on the other, and it comes back once accepted again', async () => {
      const { fake, proxy } = setup();
      await revoke(fake, TOKENS.one, true);
      try {
        // Distinct paths (no cache hit), one at a time: the least loaded token with the lower name, one, is tried first.
        for (let attempt = 0; attempt < 3; attempt++) {
          const answer = await get(`${proxy.url}/users/octocat?attempt=${attempt}`);
          expect(answer.status).toBe(200);
          expect(answer.headers['x-etagere-token']).toBe('two');
          expect(rateLimitHeaders(answer)).toEqual([]);
        }
        await until(async () => (await tokenRows(proxy)).find((row) => row.name === 'one')?.state === 'dead', 5_000, 'one dead');
      } finally {
        await revoke(fake, TOKENS.one, false);
      }
      // The revival probe (every 200 ms here) meets the 404 of rate limiting off: alive again, still unlimited.
      await until(async () => (await tokenRows(proxy)).find((row) => row.name === 'one')?.state === 'ok', 10_000, 'one revived');
      expect((await tokenRows(proxy)).find((row) => row.name === 'one')).toMatchObject({ unlimited: true, limit: null });
      const answers = await Promise.all([1, 2, 3, 4].map((n) => get(`${proxy.url}/users/alice?revived=${n}`)));
      expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
      expect(answers.map((answer) => answer.headers['x-etagere-token'])).toContain('one');
    });
  });
}

describe('GitHub Enterprise Server with rate limiting off (its default) behind the proxy', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  let redis: TestRedis;
  let shared: TestProxy;
  /** A second replica of the shared pool that never probes: it learns "unlimited" from Redis. */
  let replica: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({
      basePath: '/api/v3',
      rateLimits: false,
      latencyMs: 30,
      tokens: parseTokenSpec(`${TOKENS.one}@bob:public_repo,${TOKENS.two}@carol:public_repo`),
    });
    redis = await startRedis();
    const upstreams = [{ name: 'ghes', prefix: '/', url: fake.apiUrl, token_pool: true }];
    proxy = await startTestProxy({ upstreams, pool: POOL });
    shared = await startTestProxy({ upstreams, pool: POOL, redis: { url: redis.url, key_prefix: 'nolimit:' } });
    replica = await startTestProxy({
      upstreams,
      pool: { ...POOL, probe_at_start: false },
      redis: { url: redis.url, key_prefix: 'nolimit:' },
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await shared?.close();
    await replica?.close();
    await fake?.close();
    await redis?.stop();
  });
  beforeEach(() => fake.reset());

  behavesUnlimited('an in-process pool', () => ({ fake, proxy }));
  behavesUnlimited('a pool shared through Redis', () => ({ fake, proxy: shared }));

  it('a replica of the shared pool that never probed learns that the tokens are unlimited from Redis', async () => {
    await until(async () => (await tokenRows(replica)).every((row) => row.unlimited && row.state === 'ok'), 10_000, 'the shared state');
    const answer = await get(`${replica.url}/repos/octocat/hello-world`);
    expect(answer.status).toBe(200);
    expect(rateLimitHeaders(answer)).toEqual([]);
    expect((await get(`${replica.url}/rate_limit`)).status).toBe(404);
  });
});

describe('hostile: an upstream whose rate-limit headers are garbage', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  const garbage = (res: ServerResponse): void => {
    res.setHeader('x-ratelimit-limit', 'lots');
    res.setHeader('x-ratelimit-remaining', '-7');
    res.setHeader('x-ratelimit-reset', '1e999');
    res.setHeader('x-ratelimit-used', 'NaN');
    res.setHeader('x-ratelimit-resource', '<script>');
  };

  beforeAll(async () => {
    upstream = await startScriptedUpstream((req, res) => {
      garbage(res);
      res.setHeader('content-type', 'application/json; charset=utf-8');
      if (req.url?.startsWith('/api/v3/rate_limit') === true) {
        res.end('{"resources":{"core":{"limit":"lots","remaining":-7,"reset":null}},"message":"Rate limiting is not enabled."}');
        return;
      }
      res.end(JSON.stringify({ path: req.url }));
    });
    proxy = await startTestProxy({
      upstreams: [{ name: 'ghes', prefix: '/', url: `${upstream.url}/api/v3`, token_pool: true }],
      pool: POOL,
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  it('requests work, no garbage reaches the client, and garbage is taken neither for numbers nor for "unlimited"', async () => {
    const answers = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => get(`${proxy.url}/repos/o/r${n}`)));
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      const values = rateLimitHeaders(answer).map((name) => String(answer.headers[name]));
      for (const bad of ['lots', '-7', '1e999', 'NaN', '<script>']) expect(values).not.toContain(bad);
    }
    const rows = await tokenRows(proxy);
    expect(rows.map((row) => [row.name, row.unlimited, row.limit])).toEqual([
      ['one', false, null],
      ['two', false, null],
    ]);
    // A 200 GET /rate_limit with a garbage body is not rate limiting off: the pool answers its own (empty) figures.
    const limits = await get(`${proxy.url}/rate_limit`);
    expect(limits.status).toBe(200);
    expect(JSON.parse(limits.body)).toMatchObject({ resources: { core: { limit: 0 } } });
  });
});
