/**
 * Octokit's conditional-request polling loop (GitHub's recommended
 * pattern) is answered from the cache by a zero-config proxy. Node's fetch adds
 * `Cache-Control: no-cache` and `Pragma: no-cache` to every request with `If-None-Match`; under the
 * GitHub policies the proxy ignores that `no-cache` by default (`cache.client_no_cache`), and the
 * fake's counters show how many polls reached it.
 */
import { Octokit, type RestEndpointMethodTypes } from '@octokit/rest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { rawGet } from '../fake-upstream/helpers.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
const POLLS = 50;
const REPO = { owner: 'octocat', repo: 'hello-world' };

type RepoResponse = RestEndpointMethodTypes['repos']['get']['response'];

interface Poll {
  status: number;
  cacheStatus: string | undefined;
}

/** One conditional poll: Octokit throws a RequestError for a 304. */
async function poll(octokit: Octokit, etag: string): Promise<Poll> {
  try {
    const res: RepoResponse = await octokit.repos.get({ ...REPO, headers: { 'if-none-match': etag } });
    return { status: res.status, cacheStatus: res.headers['cache-status'] as string | undefined };
  } catch (err) {
    const failed = err as { status?: number; response?: { headers: Record<string, string | undefined> } };
    if (failed.status !== 304) throw err;
    return { status: 304, cacheStatus: failed.response?.headers['cache-status'] };
  }
}

/** The first GET, then POLLS conditional polls with its ETag; returns the polls' answers. */
async function pollingLoop(octokit: Octokit): Promise<Poll[]> {
  const first = await octokit.repos.get(REPO);
  const etag = first.headers.etag;
  expect(etag).toBeDefined();
  const polls: Poll[] = [];
  for (let index = 0; index < POLLS; index++) polls.push(await poll(octokit, etag as string));
  return polls;
}

describe('Octokit conditional polling through a zero-config proxy', () => {
  let fake: FakeUpstream;
  const proxies: TestProxy[] = [];
  const start = async (cache?: Record<string, unknown>): Promise<TestProxy> => {
    const upstream = { name: 'github', prefix: '/', url: fake.url, ...(cache === undefined ? {} : { cache }) };
    const proxy = await startTestProxy({ upstreams: [upstream] });
    proxies.push(proxy);
    return proxy;
  };

  beforeAll(async () => {
    fake = await startFakeUpstream({ port: 0, anonymousLimit: 100_000, tokenLimit: 100_000 });
  });
  afterEach(async () => {
    for (const proxy of proxies.splice(0)) await proxy.close();
    await fetch(`${fake.url}/__fake/reset`, { method: 'POST' });
  });
  afterAll(async () => {
    await fake?.close();
  });

  it('by default, every poll is a 304 from the cache: the fake sees only the first GET', async () => {
    const proxy = await start();
    const polls = await pollingLoop(new Octokit({ baseUrl: proxy.url, log: quiet }));
    expect(polls.every((answer) => answer.status === 304)).toBe(true);
    expect(polls.every((answer) => answer.cacheStatus?.startsWith('etagere; hit'))).toBe(true);
    expect(fake.stats().total).toBe(1);
  });

  it('client_no_cache: honor keeps the old behaviour: every poll goes upstream (a 304 there)', async () => {
    const proxy = await start({ client_no_cache: 'honor' });
    const polls = await pollingLoop(new Octokit({ baseUrl: proxy.url, log: quiet }));
    expect(polls.every((answer) => answer.status === 304)).toBe(true);
    expect(polls.every((answer) => answer.cacheStatus?.includes('fwd=request'))).toBe(true);
    expect(fake.stats().total).toBe(1 + POLLS);
    expect(fake.stats().notModified).toBe(POLLS);
  });

  it('under honor, a client that sends If-None-Match without no-cache still gets a 304 from the cache', async () => {
    const proxy = await start({ client_no_cache: 'honor' });
    const first = await rawGet(`${proxy.url}/repos/octocat/hello-world`, {});
    const etag = first.headers.etag as string;
    const again = await rawGet(`${proxy.url}/repos/octocat/hello-world`, { 'if-none-match': etag });
    expect(again.status).toBe(304);
    expect(again.headers['cache-status']).toMatch(/^etagere; hit/);
    expect(fake.stats().total).toBe(1);
  });

  it('rfc9111 honours the request directives unless configured otherwise', async () => {
    const honoring = await start({ policy: 'rfc9111' });
    await pollingLoop(new Octokit({ baseUrl: honoring.url, log: quiet }));
    expect(fake.stats().total).toBe(1 + POLLS);
    await honoring.close();
    proxies.splice(0);
    await fetch(`${fake.url}/__fake/reset`, { method: 'POST' });
    const ignoring = await start({ policy: 'rfc9111', client_no_cache: 'ignore' });
    await pollingLoop(new Octokit({ baseUrl: ignoring.url, log: quiet }));
    expect(fake.stats().total).toBe(1);
  });

  describe('hostile: the directives a client sends on purpose are still honoured', () => {
    it('max-age=0 beside no-cache forces a revalidation', async () => {
      const proxy = await start();
      await rawGet(`${proxy.url}/repos/octocat/hello-world`, {});
      const forced = await rawGet(`${proxy.url}/repos/octocat/hello-world`, { 'cache-control': 'no-cache, max-age=0', pragma: 'no-cache' });
      expect(forced.status).toBe(200);
      expect(forced.headers['cache-status']).toContain('fwd=request');
      expect(fake.stats().total).toBe(2);
    });

    it('no-store: the answer is not stored, so the next request goes upstream', async () => {
      const proxy = await start();
      const first = await rawGet(`${proxy.url}/repos/octocat/hello-world`, { 'cache-control': 'no-store, no-cache', pragma: 'no-cache' });
      expect(first.status).toBe(200);
      expect(first.headers['cache-status']).not.toContain('stored');
      const next = await rawGet(`${proxy.url}/repos/octocat/hello-world`, {});
      expect(next.headers['cache-status']).toContain('fwd=miss');
      expect(fake.stats().total).toBe(2);
    });

    it('only-if-cached beside no-cache answers 504 when nothing is stored, and never asks the upstream', async () => {
      const proxy = await start();
      const got = await rawGet(`${proxy.url}/repos/octocat/hello-world`, {
        'cache-control': 'only-if-cached, no-cache',
        pragma: 'no-cache',
      });
      expect(got.status).toBe(504);
      expect(JSON.parse(got.body)).toHaveProperty('message');
      expect(fake.stats().total).toBe(0);
    });

    it('a stale If-None-Match under ignore is a 200 with the current body from the cache, not a 304', async () => {
      const proxy = await start();
      await rawGet(`${proxy.url}/repos/octocat/hello-world`, {});
      const got = await rawGet(`${proxy.url}/repos/octocat/hello-world`, {
        'if-none-match': '"0000000000000000000000000000000000000000000000000000000000000000"',
        'cache-control': 'no-cache',
        pragma: 'no-cache',
      });
      expect(got.status).toBe(200);
      expect(JSON.parse(got.body)).toMatchObject({ full_name: 'octocat/hello-world' });
      expect(fake.stats().total).toBe(1);
    });
  });
});
