import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { ALICE_PUBLIC, ALICE_REPO, BOB_PUBLIC, auth, get, rate, type ErrorBody, type RateLimitBody, type RepoBody } from './helpers.js';

describe('fake upstream: ETags, conditional requests and API versions', () => {
  let fake: FakeUpstream;
  let repoUrl: string;
  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1000, tokenLimit: 1000 });
    repoUrl = `${fake.url}/repos/octocat/hello-world`;
  });
  afterAll(async () => {
    await fake.close();
  });
  beforeEach(() => fake.reset());

  it('the ETag is stable for the same body, Accept, Authorization and version', async () => {
    const first = await get(repoUrl, auth(ALICE_REPO));
    const second = await get(repoUrl, auth(ALICE_REPO));
    expect(first.headers.get('etag')).toBe(second.headers.get('etag'));
  });

  it('the ETag differs by Accept, by Authorization and by X-GitHub-Api-Version', async () => {
    const base = (await get(repoUrl, { accept: 'application/vnd.github+json' })).headers.get('etag');
    const otherAccept = (await get(repoUrl, { accept: 'application/json' })).headers.get('etag');
    const withToken = (await get(repoUrl, { accept: 'application/vnd.github+json', ...auth(BOB_PUBLIC) })).headers.get('etag');
    const otherToken = (await get(repoUrl, { accept: 'application/vnd.github+json', ...auth(ALICE_PUBLIC) })).headers.get('etag');
    const v2026 = await get(repoUrl, { accept: 'application/vnd.github+json', 'x-github-api-version': '2026-03-10' });
    const v2022 = await get(repoUrl, { accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28' });
    const etags = [base, otherAccept, withToken, otherToken, v2026.headers.get('etag')];
    expect(new Set(etags).size).toBe(etags.length);
    // an explicit default version is the default version
    expect(v2022.headers.get('etag')).toBe(base);
  });

  it('two tokens that get the same body still get different ETags', async () => {
    const alice = await get(`${fake.url}/repos/carol/notes`, auth(ALICE_PUBLIC));
    const bob2 = await get(`${fake.url}/repos/carol/notes`, auth(BOB_PUBLIC));
    expect(alice.text).toBe(bob2.text);
    expect(alice.headers.get('etag')).not.toBe(bob2.headers.get('etag'));
  });

  it('the ETag changes with the body (mutation)', async () => {
    const before = await get(repoUrl);
    const mutation = await fetch(`${fake.url}/__fake/mutate`, {
      method: 'POST',
      body: JSON.stringify({ path: '/repos/octocat/hello-world' }),
    });
    expect(mutation.status).toBe(200);
    const after = await get(repoUrl);
    expect(after.headers.get('etag')).not.toBe(before.headers.get('etag'));
  });

  it('API version 2026-03-10 changes the body slightly; unknown versions answer 400', async () => {
    const v2026 = await get(repoUrl, { 'x-github-api-version': '2026-03-10' });
    expect(v2026.status).toBe(200);
    expect(v2026.json<{ fake_api_version: string }>().fake_api_version).toBe('2026-03-10');
    expect(v2026.headers.get('x-github-api-version-selected')).toBe('2026-03-10');
    const v2022 = await get(repoUrl);
    expect(v2022.json()).not.toHaveProperty('fake_api_version');
    expect(v2022.headers.get('x-github-api-version-selected')).toBe('2022-11-28');
    const bad = await get(repoUrl, { 'x-github-api-version': '2020-01-01' });
    expect(bad.status).toBe(400);
    expect(bad.json<ErrorBody>().message).toContain('"2020-01-01", is not a supported version');
    expect(bad.json<ErrorBody>().documentation_url).toBe('https://docs.github.com/rest');
    // /rate_limit drops the deprecated top-level `rate` in 2026-03-10, as GitHub does
    const rl = await get(`${fake.url}/rate_limit`, { 'x-github-api-version': '2026-03-10' });
    expect(rl.json()).not.toHaveProperty('rate');
    expect(rl.json<RateLimitBody>().resources.core.resource).toBe('core');
  });

  it('If-None-Match with the ETag gives 304 without body, repeating validators and rate-limit headers', async () => {
    const first = await get(repoUrl, auth(ALICE_REPO));
    const etag = first.headers.get('etag')!;
    const revalidated = await get(repoUrl, { ...auth(ALICE_REPO), 'if-none-match': etag });
    expect(revalidated.status).toBe(304);
    expect(revalidated.text).toBe('');
    expect(revalidated.headers.get('etag')).toBe(etag);
    expect(revalidated.headers.get('cache-control')).toBe('private, max-age=60, s-maxage=60');
    expect(revalidated.headers.get('vary')).toBe(first.headers.get('vary'));
    expect(revalidated.headers.get('last-modified')).toBe(first.headers.get('last-modified'));
    for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-used', 'x-ratelimit-reset', 'x-ratelimit-resource']) {
      expect(revalidated.headers.get(name), name).not.toBeNull();
    }
  });

  it('a 304 to valid credentials is free; an anonymous 304 costs one request', async () => {
    const first = await get(repoUrl, auth(ALICE_REPO));
    const etag = first.headers.get('etag')!;
    const r1 = await get(repoUrl, { ...auth(ALICE_REPO), 'if-none-match': etag });
    const r2 = await get(repoUrl, { ...auth(ALICE_REPO), 'if-none-match': etag });
    expect(r1.status).toBe(304);
    expect(rate(r1.headers).remaining).toBe(rate(first.headers).remaining);
    expect(rate(r1.headers).used).toBe(rate(first.headers).used);
    expect(rate(r2.headers).used).toBe(rate(first.headers).used);

    const anon = await get(repoUrl);
    const a304 = await get(repoUrl, { 'if-none-match': anon.headers.get('etag')! });
    expect(a304.status).toBe(304);
    expect(a304.headers.get('cache-control')).toBe('public, max-age=60, s-maxage=60');
    expect(rate(a304.headers).used).toBe(rate(anon.headers).used + 1);
    expect(rate(a304.headers).remaining).toBe(rate(anon.headers).remaining - 1);
    for (const response of [first, r1, r2, anon, a304]) {
      const quota = rate(response.headers);
      expect(quota.limit).toBe(quota.remaining + quota.used);
    }
    expect(fake.stats().notModified).toBe(3);
    expect(fake.stats().quotaSpent).toBe(3);
  });

  it("revalidating token A's ETag with token B gives a full 200 that costs B quota", async () => {
    const alice = await get(repoUrl, auth(ALICE_REPO));
    const b1 = await get(repoUrl, auth(BOB_PUBLIC));
    const b2 = await get(repoUrl, { ...auth(BOB_PUBLIC), 'if-none-match': alice.headers.get('etag')! });
    expect(b2.status).toBe(200);
    expect(b2.text.length).toBeGreaterThan(0);
    expect(rate(b2.headers).used).toBe(rate(b1.headers).used + 1);
  });

  it('If-None-Match supports lists, `*` and weak comparison', async () => {
    const etag = (await get(repoUrl, auth(ALICE_REPO))).headers.get('etag')!;
    const strong = etag.slice(2);
    const cases: Array<[string, number]> = [
      [`W/"nope", ${etag}`, 304],
      [`"a","b" , ${strong}`, 304],
      ['*', 304],
      [strong, 304],
      ['W/"nope"', 200],
      ['', 200],
    ];
    for (const [inm, status] of cases) {
      const response = await get(repoUrl, { ...auth(ALICE_REPO), 'if-none-match': inm });
      expect(response.status, inm).toBe(status);
    }
  });

  it('If-Modified-Since not older than Last-Modified gives 304; older gives 200; If-None-Match wins', async () => {
    const first = await get(repoUrl, auth(ALICE_REPO));
    const lm = first.headers.get('last-modified')!;
    const later = new Date(Date.parse(lm) + 60_000).toUTCString();
    const earlier = new Date(Date.parse(lm) - 1000).toUTCString();
    expect((await get(repoUrl, { ...auth(ALICE_REPO), 'if-modified-since': lm })).status).toBe(304);
    expect((await get(repoUrl, { ...auth(ALICE_REPO), 'if-modified-since': later })).status).toBe(304);
    expect((await get(repoUrl, { ...auth(ALICE_REPO), 'if-modified-since': earlier })).status).toBe(200);
    expect((await get(repoUrl, { ...auth(ALICE_REPO), 'if-modified-since': 'not a date' })).status).toBe(200);
    const both = await get(repoUrl, { ...auth(ALICE_REPO), 'if-modified-since': lm, 'if-none-match': 'W/"other"' });
    expect(both.status).toBe(200);
  });

  it('Last-Modified follows updated_at and moves forward on mutation', async () => {
    const before = await get(repoUrl);
    expect(Date.parse(before.headers.get('last-modified')!)).toBe(Date.parse(before.json<RepoBody>().updated_at));
    await fetch(`${fake.url}/__fake/mutate`, { method: 'POST', body: JSON.stringify({ path: '/repos/octocat/hello-world' }) });
    const after = await get(repoUrl, { 'if-modified-since': before.headers.get('last-modified')! });
    expect(after.status).toBe(200);
    expect(Date.parse(after.headers.get('last-modified')!)).toBeGreaterThan(Date.parse(before.headers.get('last-modified')!));
    expect(after.json<RepoBody>().stargazers_count).toBe(before.json<RepoBody>().stargazers_count + 1);
  });

  it('lists and user records support conditional requests too; different pages have different ETags', async () => {
    const p1 = await get(`${fake.url}/orgs/etagere-org/repos?page=1`, auth(ALICE_REPO));
    const p2 = await get(`${fake.url}/orgs/etagere-org/repos?page=2`, auth(ALICE_REPO));
    expect(p1.headers.get('etag')).not.toBe(p2.headers.get('etag'));
    const again = await get(`${fake.url}/orgs/etagere-org/repos?page=1`, { ...auth(ALICE_REPO), 'if-none-match': p1.headers.get('etag')! });
    expect(again.status).toBe(304);
    const user = await get(`${fake.url}/user`, auth(ALICE_REPO));
    expect((await get(`${fake.url}/user`, { ...auth(ALICE_REPO), 'if-none-match': user.headers.get('etag')! })).status).toBe(304);
  });
});
