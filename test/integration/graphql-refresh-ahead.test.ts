/**
 * Refresh ahead (`cache.refresh_ahead`) for GraphQL answers: a pooled query's answer read while
 * fresh is fetched again in the background shortly before it expires (a whole query: GraphQL has
 * no validators), so the read after its lifetime is a fresh hit that waited on nothing; an answer
 * nobody reads again is left to expire. Lifetimes are 4 s (`graphql_cache_seconds`).
 */
import { request } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { counterBy } from '../helpers/metrics-text.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';

const TOKEN = 'gql_refresh_ahead_pool_token_5e7a';
const LIFETIME_MS = 4_000;

async function query(proxy: TestProxy, name: string): Promise<{ cacheStatus: string; body: string }> {
  const res = await request(`${proxy.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: `{ repository(owner: "octocat", name: "${name}") { nameWithOwner } }` }),
  });
  return { cacheStatus: String(res.headers['cache-status']), body: await res.body.text() };
}

describe('refresh ahead of GraphQL answers', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  const posts = (): number => fake.stats().byPath['/graphql'] ?? 0;

  beforeEach(async () => {
    fake = await startFakeUpstream({ tokens: parseTokenSpec(`${TOKEN}@alice:public_repo`) });
    proxy = await startTestProxy({
      upstreams: [
        {
          name: 'github',
          prefix: '/',
          url: fake.url,
          token_pool: true,
          graphql: true,
          graphql_cache_seconds: LIFETIME_MS / 1000,
          cache: { refresh_ahead: true },
        },
      ],
      pool: { tokens: [{ name: 'a', value: TOKEN }], probe_at_start: false },
    });
  });
  afterEach(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('a hot answer is fetched again before it expires, and the read after its lifetime is a fresh hit', async () => {
    const first = await query(proxy, 'hello-world');
    const storedAt = Date.now();
    expect((await query(proxy, 'hello-world')).cacheStatus).toMatch(/^etagere; hit/);
    await until(async () => posts() >= 2, 5_000, 'a refresh ahead');
    expect(Date.now() - storedAt).toBeLessThan(LIFETIME_MS);
    const res = await request(`${proxy.adminUrl}/metrics`);
    expect(counterBy(await res.body.text(), 'etagere_refresh_ahead_total', 'result').modified).toBe(1);
    await until(() => Date.now() > storedAt + LIFETIME_MS + 100, 5_000, 'the first lifetime to end');
    const after = await query(proxy, 'hello-world');
    expect([after.cacheStatus, after.body]).toEqual([expect.stringMatching(/^etagere; hit/), first.body]);
    expect(posts()).toBe(2);
  }, 15_000);

  it('an answer nobody reads while fresh is not refreshed: it expires and the next read goes upstream', async () => {
    const before = posts();
    await query(proxy, 'spoon-knife');
    const storedAt = Date.now();
    await until(() => Date.now() > storedAt + LIFETIME_MS + 100, 6_000, 'the lifetime to end');
    expect(posts()).toBe(before + 1);
    expect((await query(proxy, 'spoon-knife')).cacheStatus).toMatch(/fwd=miss/);
  }, 15_000);
});
