/**
 * Octokit as an anonymous consumer of the token pool: it paginates with the pool's tokens, sees
 * the pool's rate-limit headers, and gets a RequestError 429 with Retry-After once the pool is
 * spent, the way it would from GitHub itself.
 */
import { Octokit } from '@octokit/rest';
import { RequestError } from '@octokit/request-error';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
const KEY = 'octokit_consumer_key_77';

/** An Octokit that sends the consumer key on every request. */
function consumer(baseUrl: string): Octokit {
  const octokit = new Octokit({ baseUrl, log: quiet });
  octokit.hook.before('request', (options) => {
    options.headers['x-etagere-key'] = KEY;
  });
  return octokit;
}

describe('octokit through the token pool', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({
      tokens: parseTokenSpec('okt_pool_one@alice:public_repo,okt_pool_two@bob:public_repo'),
      tokenLimit: 10,
    });
    proxy = await startTestProxy({
      trust_forwarded: true, // Link headers point back at the proxy, so pages use the pool too
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
      pool: {
        tokens: [
          { name: 'one', value: 'okt_pool_one' },
          { name: 'two', value: 'okt_pool_two' },
        ],
      },
      consumers: { enabled: true, keys: [{ name: 'octokit', value: KEY }] },
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('paginates with pool tokens and sees the pool as one quota', async () => {
    const octokit = consumer(proxy.url);
    const repos = await octokit.paginate(octokit.repos.listForOrg, { org: 'etagere-org', per_page: 30 });
    expect(repos).toHaveLength(75);
    const res = await octokit.users.getByUsername({ username: 'octocat' });
    expect(res.headers['x-ratelimit-limit']).toBe('20');
    expect(Number(res.headers['x-ratelimit-remaining'])).toBe(20 - 4);
    expect(['one', 'two']).toContain((res.headers as Record<string, unknown>)['x-etagere-token']);
  });

  it('is refused without its consumer key', async () => {
    const stranger = new Octokit({ baseUrl: proxy.url, log: quiet });
    const err = await stranger.users.getByUsername({ username: 'octocat' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RequestError);
    expect((err as RequestError).status).toBe(401);
  });

  it('gets a 429 with Retry-After once the pool is spent, and no upstream limit error', async () => {
    const octokit = consumer(proxy.url);
    let err: unknown;
    for (let i = 0; i < 30 && err === undefined; i++) {
      err = await octokit.repos.get({ owner: 'octocat', repo: 'hello-world', per_page: i }).then(
        () => undefined,
        (e: unknown) => e,
      );
    }
    expect(err).toBeInstanceOf(RequestError);
    expect((err as RequestError).status).toBe(429);
    expect(Number((err as RequestError).response?.headers['retry-after'])).toBeGreaterThan(0);
    expect(fake.stats().quotaSpent).toBe(20);
    expect(fake.stats().byStatus['403']).toBeUndefined();
    expect(fake.stats().byStatus['429']).toBeUndefined();
  });
});
