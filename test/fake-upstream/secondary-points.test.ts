import { beforeEach, describe, expect, it } from 'vitest';
import { ALICE_REPO, BOB_PUBLIC, auth, get, post, useFake, type ErrorBody } from './helpers.js';

interface PointsBody {
  points: { rest: number; graphql: number; refused: number };
}

describe("fake upstream: GitHub's secondary-limit points", () => {
  const fake = useFake({ enforcePoints: true, pointsPerMinute: 10, graphqlPointsPerMinute: 3 });
  beforeEach(async () => {
    expect((await post(`${fake.url}/__fake/reset`, {})).status).toBe(200);
  });

  it('refuses a credential that spends more than its points in a minute: 403, the documented message, retry-after', async () => {
    for (let i = 0; i < 10; i++) expect((await get(`${fake.url}/users/octocat`, auth(ALICE_REPO))).status).toBe(200);
    const refused = await get(`${fake.url}/users/octocat`, auth(ALICE_REPO));
    expect(refused.status).toBe(403);
    expect(refused.json<ErrorBody>().message).toMatch(/secondary rate limit/);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(59);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // Another credential has points of its own.
    expect((await get(`${fake.url}/users/octocat`, auth(BOB_PUBLIC))).status).toBe(200);
    expect((await get(`${fake.url}/__fake/secondary`)).json<PointsBody>().points).toEqual({ rest: 11, graphql: 0, refused: 1 });
  });

  it('counts a 304 (free on the primary limit) and a write (5 points) as GitHub does', async () => {
    const first = await get(`${fake.url}/users/octocat`, auth(ALICE_REPO));
    const etag = first.headers.get('etag')!;
    for (let i = 0; i < 4; i++) {
      expect((await get(`${fake.url}/users/octocat`, { ...auth(ALICE_REPO), 'if-none-match': etag })).status).toBe(304);
    }
    // 5 points spent: a write (5) still fits, then nothing does.
    const write = await fetch(`${fake.url}/user/starred/octocat/hello-world`, { method: 'PUT', headers: auth(ALICE_REPO) });
    expect(write.status).not.toBe(403);
    expect((await get(`${fake.url}/users/octocat`, auth(ALICE_REPO))).status).toBe(403);
  });

  it('keeps GraphQL points apart, out of their own budget', async () => {
    for (let i = 0; i < 10; i++) await get(`${fake.url}/users/octocat`, auth(ALICE_REPO));
    const query = (): Promise<Response> =>
      fetch(`${fake.url}/graphql`, { method: 'POST', headers: auth(ALICE_REPO), body: JSON.stringify({ query: '{ viewer { login } }' }) });
    for (let i = 0; i < 3; i++) expect((await query()).status).toBe(200);
    expect((await query()).status).toBe(403);
  });

  it('is off unless asked for, and can be switched at run time', async () => {
    expect((await post(`${fake.url}/__fake/config`, { enforcePoints: false })).status).toBe(200);
    for (let i = 0; i < 20; i++) expect((await get(`${fake.url}/users/octocat`, auth(ALICE_REPO))).status).toBe(200);
    expect((await post(`${fake.url}/__fake/config`, { enforcePoints: true, pointsPerMinute: 900 })).status).toBe(200);
    expect((await post(`${fake.url}/__fake/config`, { enforcePoints: 'yes' })).status).toBe(400);
    expect((await post(`${fake.url}/__fake/config`, { pointsPerMinute: 0 })).status).toBe(400);
    expect((await post(`${fake.url}/__fake/config`, { pointsPerMinute: 10 })).status).toBe(200);
  });
});
