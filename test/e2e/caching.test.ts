/**
 * Caching end to end against the fake GitHub API, counted with the fake's own stats:
 * freshness, revalidation with free 304s, client no-cache, coalescing, mutations,
 * stale-if-error and client conditional requests.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';

const ALICE = 'token demo_token_alice_repo';
const BOB = 'token demo_token_bob_public';
const CAROL = 'token demo_token_carol_repo';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

async function get(url: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET'): Promise<Answer> {
  const res = await request(url, { method, headers });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

const cacheStatus = (a: Answer) => String(a.headers['cache-status'] ?? '');
const isHit = (a: Answer) => /^etagere; hit\b/.test(cacheStatus(a));

async function mutate(fake: FakeUpstream, path: string): Promise<void> {
  const res = await request(`${fake.url}/__fake/mutate`, {
    method: 'POST',
    body: JSON.stringify({ path }),
    headers: { 'content-type': 'application/json' },
  });
  expect(res.statusCode).toBe(200);
  await res.body.dump();
}

/** Requests `url` until the answer is not a cache hit (the entry expired); returns that answer. */
async function firstNonHit(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  let last: Answer | undefined;
  await until(
    async () => {
      last = await get(url, headers);
      return !isHit(last);
    },
    5_000,
    `a non-hit answer for ${url}`,
  );
  return last!;
}

describe('caching against the fake GitHub API', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ port: 0, anonymousLimit: 100_000, tokenLimit: 100_000 });
    proxy = await startTestProxy({
      upstreams: [
        { name: 'api', prefix: '/', url: fake.url },
        { name: 'cap', prefix: '/cap', url: fake.url, strip_prefix: true, cache: { policy: 'max-age', max_age_cap_seconds: 1 } },
        { name: 'reval', prefix: '/reval', url: fake.url, strip_prefix: true, cache: { policy: 'revalidate' } },
        { name: 'cyclists', prefix: '/bicyclists', url: fake.url, cache: { policy: 'ttl', ttl_seconds: 30 } },
      ],
    });
  });
  beforeEach(() => fake.reset());
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('10 sequential GETs while fresh cost exactly one upstream request', async () => {
    const answers: Answer[] = [];
    for (let i = 0; i < 10; i++) answers.push(await get(`${proxy.url}/repos/octocat/hello-world`));
    expect(fake.stats().total).toBe(1);
    expect(fake.stats().byPath['/repos/octocat/hello-world']).toBe(1);
    expect(answers.every((a) => a.status === 200 && a.body === answers[0]!.body)).toBe(true);
    expect(cacheStatus(answers[0]!)).toMatch(/^etagere; fwd=miss; fwd-status=200; ttl=\d+; stored$/);
    for (const answer of answers.slice(1)) expect(cacheStatus(answer)).toMatch(/^etagere; hit; ttl=\d+/);
  });

  it('after expiry (1 s cap) one upstream 304 refreshes the entry and spends no quota', async () => {
    const url = `${proxy.url}/cap/repos/octocat/hello-world`;
    const first = await get(url, { authorization: ALICE });
    expect(first.status).toBe(200);
    const before = fake.stats();
    expect(before.total).toBe(1);
    expect(before.quotaSpent).toBe(1);

    const after = await firstNonHit(url, { authorization: ALICE });
    const stats = fake.stats();
    expect(after.status).toBe(200);
    expect(after.body).toBe(first.body);
    expect(cacheStatus(after)).toMatch(/^etagere; fwd=stale; fwd-status=304\b/);
    expect(stats.total).toBe(2);
    expect(stats.notModified).toBe(before.notModified + 1);
    expect(stats.quotaSpent).toBe(before.quotaSpent);
    expect(after.headers['x-ratelimit-remaining']).toBe(first.headers['x-ratelimit-remaining']);
    expect(after.headers['x-ratelimit-used']).toBe(first.headers['x-ratelimit-used']);
  });

  it('policy revalidate: N GETs with a token give one 200 and N-1 304s upstream', async () => {
    const requestCount = 8;
    const answers: Answer[] = [];
    for (let i = 0; i < requestCount; i++) answers.push(await get(`${proxy.url}/reval/repos/octocat/hello-world`, { authorization: BOB }));
    const stats = fake.stats();
    expect(stats.total).toBe(requestCount);
    expect(stats.byStatus).toEqual({ '200': 1, '304': requestCount - 1 });
    expect(stats.notModified).toBe(requestCount - 1);
    expect(stats.quotaSpent).toBe(1);
    expect(answers.every((a) => a.status === 200 && a.body === answers[0]!.body)).toBe(true);
    for (const answer of answers.slice(1)) expect(cacheStatus(answer)).toMatch(/fwd-status=304/);
  });

  // `max-age=0`: under the GitHub policies a conditional request's `no-cache` is ignored by default (Node's
  // fetch adds it to every conditional request; test/e2e/octokit-polling.test.ts).
  it('client Cache-Control: max-age=0 forces one revalidation (a 304)', async () => {
    const url = `${proxy.url}/repos/octocat/linguist`;
    const first = await get(url, { authorization: CAROL });
    expect(isHit(await get(url, { authorization: CAROL }))).toBe(true);
    expect(fake.stats().total).toBe(1);
    const forced = await get(url, { authorization: CAROL, 'cache-control': 'max-age=0' });
    expect(forced.status).toBe(200);
    expect(forced.body).toBe(first.body);
    expect(cacheStatus(forced)).toMatch(/^etagere; fwd=request; fwd-status=304\b/);
    const stats = fake.stats();
    expect(stats.total).toBe(2);
    expect(stats.notModified).toBe(1);
    expect(stats.quotaSpent).toBe(1);
  });

  it('200 concurrent GETs of a cold key cost exactly one upstream request', async () => {
    const url = `${proxy.url}/users/carol`;
    const answers = await Promise.all(Array.from({ length: 200 }, () => get(url)));
    expect(fake.stats().total).toBe(1);
    expect(answers.every((a) => a.status === 200 && a.body === answers[0]!.body)).toBe(true);
    expect(JSON.parse(answers[0]!.body).login).toBe('carol');
  });

  it('after a mutation, a max-age=0 request brings the new body (and it is stored)', async () => {
    const url = `${proxy.url}/repos/octocat/spoon-knife`;
    const old = await get(url, { authorization: ALICE });
    await mutate(fake, '/repos/octocat/spoon-knife');
    const direct = await get(`${fake.url}/repos/octocat/spoon-knife`, { authorization: ALICE });
    expect(direct.body).not.toBe(old.body);
    // Still fresh: the cache serves the old representation until asked to revalidate.
    const cached = await get(url, { authorization: ALICE });
    expect(isHit(cached)).toBe(true);
    expect(cached.body).toBe(old.body);

    const forced = await get(url, { authorization: ALICE, 'cache-control': 'max-age=0' });
    expect(forced.status).toBe(200);
    expect(forced.body).toBe(direct.body);
    expect(cacheStatus(forced)).toMatch(/^etagere; fwd=request; fwd-status=200\b/);
    const next = await get(url, { authorization: ALICE });
    expect(isHit(next)).toBe(true);
    expect(next.body).toBe(direct.body);
  });

  it('after a mutation, the first answer after expiry (1 s cap) carries the new body', async () => {
    const url = `${proxy.url}/cap/repos/alice/website`;
    const old = await get(url, { authorization: BOB });
    expect(old.status).toBe(200);
    await mutate(fake, '/repos/alice/website');
    const direct = await get(`${fake.url}/repos/alice/website`, { authorization: BOB });
    expect(direct.body).not.toBe(old.body);
    const after = await firstNonHit(url, { authorization: BOB });
    expect(after.status).toBe(200);
    expect(after.body).toBe(direct.body);
    expect(cacheStatus(after)).toMatch(/^etagere; fwd=stale; fwd-status=200\b/);
  });

  it('client If-None-Match with the ETag gets a 304 with an empty body', async () => {
    const url = `${proxy.url}/users/octocat`;
    const first = await get(url, { authorization: ALICE });
    const etag = String(first.headers.etag);
    expect(etag).toMatch(/^W\/"/);
    const cond = await get(url, { authorization: ALICE, 'if-none-match': etag });
    expect(cond.status).toBe(304);
    expect(cond.body).toBe('');
    expect(cond.headers.etag).toBe(etag);
    // A stale validator gets the full body.
    const other = await get(url, { authorization: ALICE, 'if-none-match': 'W/"nope"' });
    expect(other.status).toBe(200);
    expect(other.body).toBe(first.body);
    expect(fake.stats().total).toBe(1);
  });

  it('the cyclist service under policy ttl is served from cache within the TTL', async () => {
    const answers: Answer[] = [];
    for (let i = 0; i < 5; i++) answers.push(await get(`${proxy.url}/bicyclists/malaga`));
    expect(answers.every((a) => a.status === 200 && a.body === '27182')).toBe(true);
    expect(fake.stats().byPath['/bicyclists/malaga']).toBe(1);
    expect(fake.stats().total).toBe(1);
    expect(cacheStatus(answers[0]!)).toMatch(/^etagere; fwd=miss; fwd-status=200; ttl=30; stored$/);
    for (const answer of answers.slice(1)) expect(isHit(answer)).toBe(true);
  });
});

describe('caching when the upstream is gone', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  let closed = false;

  beforeAll(async () => {
    fake = await startFakeUpstream({ port: 0, anonymousLimit: 100_000, tokenLimit: 100_000 });
    proxy = await startTestProxy({
      upstreams: [
        { name: 'api', prefix: '/', url: fake.url, timeouts: { connect_ms: 1000, headers_ms: 2000 }, cache: { max_age_cap_seconds: 1 } },
      ],
    });
  });
  afterAll(async () => {
    await proxy?.close();
    if (!closed) await fake?.close();
  });

  it('serves an expired entry stale-if-error, and a 502 for a key never cached', async () => {
    const url = `${proxy.url}/repos/octocat/hello-world`;
    const first = await get(url, { authorization: ALICE });
    expect(first.status).toBe(200);
    await fake.close();
    closed = true;

    const stale = await firstNonHit(url, { authorization: ALICE });
    expect(stale.status).toBe(200);
    expect(stale.body).toBe(first.body);
    expect(cacheStatus(stale)).toContain('fwd=stale');
    expect(cacheStatus(stale)).toContain('detail=stale-if-error');

    const never = await get(`${proxy.url}/users/octocat`, { authorization: ALICE });
    expect(never.status).toBe(502);
    const body = JSON.parse(never.body) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['documentation_url', 'message']);
    expect(typeof body.message).toBe('string');
    expect(typeof body.documentation_url).toBe('string');
  });
});
