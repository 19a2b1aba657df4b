/**
 * The fake with rate limits off (`rateLimits: false`, `--no-rate-limits`), as GitHub Enterprise
 * Server serves by default: GET /rate_limit answers 404 "Rate limiting is not enabled.", no answer
 * carries x-ratelimit-*, no primary quota runs out; secondary limits, faults and bad credentials
 * work as ever. Turned on and off at run time through /__fake/config.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { ALICE_REPO, auth, BOB_PUBLIC, get, post, until, useFake, type ErrorBody, type Got } from './helpers.js';

function rateLimitHeaders(answer: Got): string[] {
  return [...answer.headers.keys()].filter((name) => name.startsWith('x-ratelimit-'));
}

describe('fake upstream with rate limits off (GitHub Enterprise Server default)', () => {
  const fake = useFake({ basePath: '/api/v3', rateLimits: false, tokenLimit: 3, anonymousLimit: 2 });
  beforeEach(async () => {
    expect((await post(`${fake.url}/__fake/reset`, { config: true })).status).toBe(200);
  });

  it('GET /rate_limit answers 404 "Rate limiting is not enabled." to every caller, with no x-ratelimit-*', async () => {
    for (const headers of [auth(ALICE_REPO), {}]) {
      const answer = await get(`${fake.apiUrl}/rate_limit`, headers);
      expect(answer.status).toBe(404);
      expect(answer.json<ErrorBody>()).toEqual({
        message: 'Rate limiting is not enabled.',
        documentation_url: expect.stringMatching(/^https:\/\/docs\.github\.com\/enterprise-server/) as string,
      });
      expect(rateLimitHeaders(answer)).toEqual([]);
    }
  });

  it('no answer carries x-ratelimit-*, and no quota runs out (far past the configured limits)', async () => {
    for (let i = 0; i < 10; i++) {
      const own = await get(`${fake.apiUrl}/repos/octocat/hello-world`, auth(ALICE_REPO));
      expect(own.status).toBe(200);
      expect(rateLimitHeaders(own)).toEqual([]);
      const anonymous = await get(`${fake.apiUrl}/search/repositories?q=hello`);
      expect(anonymous.status).toBe(200);
      expect(rateLimitHeaders(anonymous)).toEqual([]);
    }
    const missing = await get(`${fake.apiUrl}/repos/octocat/nope`, auth(ALICE_REPO));
    expect(missing.status).toBe(404);
    expect(rateLimitHeaders(missing)).toEqual([]);
  });

  it('hostile: a bad token still gets 401, and secondary limits still answer 403 with Retry-After', async () => {
    const bad = await get(`${fake.apiUrl}/user`, auth('not_a_token_of_the_fake'));
    expect(bad.status).toBe(401);
    expect(rateLimitHeaders(bad)).toEqual([]);
    expect((await post(`${fake.url}/__fake/secondary`, { count: 1, retryAfter: 9 })).status).toBe(200);
    const limited = await get(`${fake.apiUrl}/repos/octocat/hello-world`, auth(BOB_PUBLIC));
    expect(limited.status).toBe(403);
    expect(limited.headers.get('retry-after')).toBe('9');
    expect(limited.json<ErrorBody>().message).toMatch(/secondary rate limit/);
    expect(rateLimitHeaders(limited)).toEqual([]);
  });

  it('/__fake/config turns rate limits on and off; a value that is not a boolean is a 400', async () => {
    expect((await post(`${fake.url}/__fake/config`, { rateLimits: true })).status).toBe(200);
    const on = await get(`${fake.apiUrl}/rate_limit`, auth(ALICE_REPO));
    expect(on.status).toBe(200);
    expect(on.headers.get('x-ratelimit-limit')).toBe('3');
    expect((await post(`${fake.url}/__fake/config`, { rateLimits: false })).status).toBe(200);
    expect((await get(`${fake.apiUrl}/rate_limit`, auth(ALICE_REPO))).status).toBe(404);
    const wrong = await post(`${fake.url}/__fake/config`, { rateLimits: 'no' });
    expect(wrong.status).toBe(400);
    expect(wrong.json<ErrorBody>().message).toContain('rateLimits');
  });
});

describe('etagere fake-upstream --no-rate-limits', () => {
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    stop = undefined;
  });

  it('starts with rate limits off and says so', async () => {
    const cli = runCli(['fake-upstream', '--port', '0', '--no-rate-limits']);
    stop = async () => {
      cli.child.kill('SIGTERM');
      await cli.exited;
    };
    await until(async () => (/rate limits off/.test(cli.stdout()) ? true : undefined), 15_000, 25);
    const url = /listening on (http:\/\/\S+)/.exec(cli.stdout())![1]!;
    const answer = await get(`${url}/rate_limit`, auth(ALICE_REPO));
    expect(answer.status).toBe(404);
    expect(answer.json<ErrorBody>().message).toBe('Rate limiting is not enabled.');
  });
});
