import { afterEach, describe, expect, it } from 'vitest';
import {
  ALICE_REPO,
  BOB_PUBLIC,
  CAROL_REPO,
  auth,
  get,
  post,
  rate,
  until,
  useFake,
  type ErrorBody,
  type RateLimitBody,
} from './helpers.js';

/** What GET and POST /__fake/secondary answer: the scripted secondary-limit failures still to come. */
interface SecondaryBody {
  secondary: { count: number; status: number; retryAfter: number | null; token: string | null };
}

describe('fake upstream: credentials and 401s', () => {
  const fake = useFake();

  it('uses the documented default limits: 60 anonymous, 5000 per token', async () => {
    const anon = await get(`${fake.url}/users/octocat`);
    expect(rate(anon.headers).limit).toBe(60);
    const tok = await get(`${fake.url}/users/octocat`, auth(ALICE_REPO));
    expect(rate(tok.headers).limit).toBe(5000);
    const reset = rate(anon.headers).reset;
    expect(reset).toBeGreaterThan(Date.now() / 1000 + 3500);
    expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 3600);
  });

  it('an unknown token gets 401 Bad credentials', async () => {
    const response = await get(`${fake.url}/users/octocat`, auth('no_such_token'));
    expect(response.status).toBe(401);
    expect(response.json()).toEqual({ message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' });
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
  });

  it('malformed Authorization headers get 401 and never crash the server', async () => {
    const bad = [
      'token',
      'token ',
      'Bearer a b',
      'Basic !!!notbase64',
      `Basic ${Buffer.from('no-colon').toString('base64')}`,
      `Basic ${Buffer.from('alice:').toString('base64')}`,
      'Digest abc',
      'x'.repeat(2000),
    ];
    for (const value of bad) {
      const response = await get(`${fake.url}/users/octocat`, { authorization: value });
      expect(response.status, value).toBe(401);
      expect(response.json<ErrorBody>().message).toBe('Bad credentials');
    }
    expect((await get(`${fake.url}/users/octocat`, auth(ALICE_REPO))).status).toBe(200);
  });

  it('/user and /user/repos without credentials get 401 Requires authentication', async () => {
    for (const path of ['/user', '/user/repos']) {
      const response = await get(`${fake.url}${path}`);
      expect(response.status, path).toBe(401);
      expect(response.json()).toEqual({ message: 'Requires authentication', documentation_url: 'https://docs.github.com/rest' });
    }
  });
});

describe('fake upstream: primary rate limit', () => {
  const fake = useFake({ anonymousLimit: 3, tokenLimit: 4 });
  afterEach(() => fake.reset());

  it('exhausted anonymous quota: 403, remaining 0, GitHub message naming the address', async () => {
    const seen = [];
    for (let i = 0; i < 3; i++) seen.push(await get(`${fake.url}/users/octocat`));
    expect(seen.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(seen.map((r) => rate(r.headers).remaining)).toEqual([2, 1, 0]);
    const over = await get(`${fake.url}/users/octocat`);
    expect(over.status).toBe(403);
    expect(over.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(over.headers.get('x-ratelimit-used')).toBe('3');
    expect(over.headers.get('x-ratelimit-limit')).toBe('3');
    const body = over.json<ErrorBody>();
    expect(body.message).toMatch(/^API rate limit exceeded for 127\.0\.0\.1\./);
    expect(body.documentation_url).toBe('https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting');
    // zen, 404s and lists are all refused too; /rate_limit still answers
    expect((await get(`${fake.url}/zen`)).status).toBe(403);
    expect((await get(`${fake.url}/nope`)).status).toBe(403);
    const rl = await get(`${fake.url}/rate_limit`);
    expect(rl.status).toBe(200);
    expect(rl.json<RateLimitBody>().resources.core.remaining).toBe(0);
    // the cyclist service has no quota
    expect((await get(`${fake.url}/bicyclists/malaga`)).status).toBe(200);
  });

  it('each token has its own window; exhaustion names the user; other credentials are unaffected', async () => {
    for (let i = 0; i < 4; i++) expect((await get(`${fake.url}/users/bob`, auth(ALICE_REPO))).status).toBe(200);
    const over = await get(`${fake.url}/users/bob`, auth(ALICE_REPO));
    expect(over.status).toBe(403);
    expect(over.json<ErrorBody>().message).toBe('API rate limit exceeded for user ID 100001.');
    expect(rate(over.headers)).toMatchObject({ limit: 4, remaining: 0, used: 4 });
    // an authorised conditional request is refused as well while exhausted
    expect((await get(`${fake.url}/users/bob`, { ...auth(ALICE_REPO), 'if-none-match': '*' })).status).toBe(403);
    expect((await get(`${fake.url}/users/bob`, auth(BOB_PUBLIC))).status).toBe(200);
    expect((await get(`${fake.url}/users/bob`)).status).toBe(200);
    expect(fake.stats().quotaSpent).toBe(6);
  });

  it('limit = remaining + used on every answer, including errors', async () => {
    for (const path of ['/users/octocat', '/nope', '/zen', '/users/octocat', '/users/octocat']) {
      const response = await get(`${fake.url}${path}`, auth(CAROL_REPO));
      const quota = rate(response.headers);
      expect(quota.limit, path).toBe(quota.remaining + quota.used);
    }
  });

  it('a window resets after windowSeconds (x-ratelimit-reset marks its end)', async () => {
    await post(`${fake.url}/__fake/config`, { windowSeconds: 1, anonymousLimit: 2 });
    try {
      const first = await get(`${fake.url}/users/octocat`);
      await get(`${fake.url}/users/octocat`);
      const over = await get(`${fake.url}/users/octocat`);
      expect(over.status).toBe(403);
      const reset = rate(first.headers).reset;
      expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 1);
      const fresh = await until(async () => {
        const response = await get(`${fake.url}/users/octocat`);
        return response.status === 200 ? response : undefined;
      });
      expect(Date.now() / 1000).toBeGreaterThanOrEqual(reset - 1);
      expect(rate(fresh.headers)).toMatchObject({ limit: 2, remaining: 1, used: 1 });
      expect(rate(fresh.headers).reset).toBeGreaterThanOrEqual(reset);
    } finally {
      await post(`${fake.url}/__fake/reset`, { config: true });
    }
  });
});

describe('fake upstream: secondary rate limits', () => {
  const fake = useFake({ anonymousLimit: 1000 });
  afterEach(() => fake.reset());

  it('scripted 429 with retry-after for the next N requests, then normal service', async () => {
    const set = await post(`${fake.url}/__fake/secondary`, { count: 2, status: 429, retryAfter: 7 });
    expect(set.status).toBe(200);
    expect(set.json<SecondaryBody>().secondary).toEqual({ count: 2, status: 429, retryAfter: 7, token: null });
    const before = rate((await get(`${fake.url}/rate_limit`)).headers).used;
    for (let i = 0; i < 2; i++) {
      const response = await get(`${fake.url}/repos/octocat/hello-world`);
      expect(response.status).toBe(429);
      expect(response.headers.get('retry-after')).toBe('7');
      expect(response.json<ErrorBody>().message).toContain('You have exceeded a secondary rate limit');
      expect(response.headers.get('x-ratelimit-remaining')).not.toBeNull();
    }
    expect((await get(`${fake.url}/repos/octocat/hello-world`)).status).toBe(200);
    // the failures spent no primary quota
    expect(rate((await get(`${fake.url}/rate_limit`)).headers).used).toBe(before + 1);
    expect((await get(`${fake.url}/__fake/secondary`)).json<SecondaryBody>().secondary.count).toBe(0);
  });

  it('403 without retry-after when retryAfter is null', async () => {
    await post(`${fake.url}/__fake/secondary`, { count: 1, status: 403, retryAfter: null });
    const response = await get(`${fake.url}/users/octocat`);
    expect(response.status).toBe(403);
    expect(response.headers.get('retry-after')).toBeNull();
    expect(response.json<ErrorBody>().message).toContain('secondary rate limit');
  });

  it('can target one token (by login or value) or anonymous callers', async () => {
    await post(`${fake.url}/__fake/secondary`, { count: 1, status: 403, retryAfter: 30, token: 'alice' });
    expect((await get(`${fake.url}/users/octocat`)).status).toBe(200);
    expect((await get(`${fake.url}/users/octocat`, auth(BOB_PUBLIC))).status).toBe(200);
    const hit = await get(`${fake.url}/users/octocat`, auth(ALICE_REPO));
    expect(hit.status).toBe(403);
    expect(hit.headers.get('retry-after')).toBe('30');
    expect((await get(`${fake.url}/users/octocat`, auth(ALICE_REPO))).status).toBe(200);

    await post(`${fake.url}/__fake/secondary`, { count: 1, token: BOB_PUBLIC });
    expect((await get(`${fake.url}/users/octocat`, auth(ALICE_REPO))).status).toBe(200);
    const bob = await get(`${fake.url}/users/octocat`, auth(BOB_PUBLIC));
    expect(bob.status).toBe(403);
    expect(bob.headers.get('retry-after')).toBe('60');

    await post(`${fake.url}/__fake/secondary`, { count: 1, status: 429, token: 'anonymous' });
    expect((await get(`${fake.url}/users/octocat`, auth(ALICE_REPO))).status).toBe(200);
    expect((await get(`${fake.url}/users/octocat`)).status).toBe(429);
  });

  it('rejects bad secondary settings with 400', async () => {
    for (const body of [
      { count: 1, status: 500 },
      { status: 403 },
      { count: -1 },
      { count: 1, retryAfter: 'soon' },
      { count: 1, token: 5 },
      { count: 1, extra: true },
    ]) {
      const response = await post(`${fake.url}/__fake/secondary`, body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(typeof response.json<ErrorBody>().message).toBe('string');
    }
  });
});

describe('fake upstream: concurrency limit and latency', () => {
  const fake = useFake({ anonymousLimit: 1000, latencyMs: 150, enforceConcurrency: 2 });

  it('delays responses by latencyMs', async () => {
    const t0 = performance.now();
    const response = await get(`${fake.url}/users/octocat`);
    expect(response.status).toBe(200);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
  });

  it('answers secondary-limit 403s beyond enforceConcurrency requests in flight', async () => {
    const all = await Promise.all(Array.from({ length: 6 }, () => get(`${fake.url}/users/octocat`)));
    const statuses = all.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(2);
    const refused = all.filter((r) => r.status === 403);
    expect(refused).toHaveLength(4);
    for (const response of refused) {
      expect(response.json<ErrorBody>().message).toContain('secondary rate limit');
      expect(response.headers.get('retry-after')).toBe('1');
    }
    expect(fake.stats().maxInFlight).toBeGreaterThanOrEqual(6);
  });
});
