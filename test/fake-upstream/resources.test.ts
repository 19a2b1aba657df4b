/**
 * The fake's rate-limit resources, as GitHub has them: each token has a separate budget per
 * resource (core, search, code_search, graphql, ...), every answer names its resource in
 * x-ratelimit-resource, and GET /rate_limit lists them all. Also the App-only endpoints, which
 * answer 401 to a perfectly good token, and revoking a token at runtime.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RESOURCES } from '../../fake-github/quota.js';
import { ALICE_REPO, BOB_PUBLIC, auth, get, post, rate, useFake, type ErrorBody, type JsonObject } from './helpers.js';

interface Budget {
  limit: number;
  used: number;
  remaining: number;
  reset: number;
  resource: string;
}
interface RateLimitAll {
  resources: Record<string, Budget>;
  rate?: Budget;
}

describe('fake upstream: rate-limit resources', () => {
  const fake = useFake({ tokenLimit: 50, searchLimit: 3, codeSearchLimit: 2 });
  afterEach(() => fake.reset());

  it('GET /rate_limit lists every resource, each GitHub-shaped, and rate is core', async () => {
    const body = (await get(`${fake.url}/rate_limit`, auth(ALICE_REPO))).json<RateLimitAll>();
    expect(Object.keys(body.resources)).toEqual(RESOURCES);
    for (const [name, budget] of Object.entries(body.resources)) {
      expect(budget.resource).toBe(name);
      expect(budget.limit).toBe(budget.remaining + budget.used);
    }
    expect(body.resources.core!.limit).toBe(50);
    expect(body.resources.search!.limit).toBe(3);
    expect(body.resources.code_search!.limit).toBe(2);
    expect(body.resources.graphql!.limit).toBe(5000);
    expect(body.rate).toEqual(body.resources.core);
    // Anonymous callers: 10 searches at most, no GraphQL.
    const anonymous = (await get(`${fake.url}/rate_limit`)).json<RateLimitAll>();
    expect(anonymous.resources.search!.limit).toBe(3);
    expect(anonymous.resources.graphql!.limit).toBe(0);
  });

  it('search spends its own budget; spending it all leaves core untouched', async () => {
    for (let i = 0; i < 3; i++) {
      const found = await get(`${fake.url}/search/repositories?q=hello&i=${i}`, auth(ALICE_REPO));
      expect(found.status).toBe(200);
      expect(found.headers.get('x-ratelimit-resource')).toBe('search');
      expect(rate(found.headers)).toMatchObject({ limit: 3, remaining: 2 - i });
      expect(found.headers.get('cache-control')).toBe('no-cache');
      const body = found.json<{ total_count: number; items: JsonObject[] }>();
      expect(body.total_count).toBe(1);
      expect(body.items[0]).toMatchObject({ full_name: 'octocat/hello-world', score: 1 });
    }
    const spent = await get(`${fake.url}/search/repositories?q=hello`, auth(ALICE_REPO));
    expect(spent.status).toBe(403);
    expect(spent.headers.get('x-ratelimit-resource')).toBe('search');
    expect(spent.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(spent.json<ErrorBody>().message).toMatch(/rate limit exceeded/);
    // core is another budget: still whole but for this one request.
    const core = await get(`${fake.url}/users/octocat`, auth(ALICE_REPO));
    expect(core.status).toBe(200);
    expect(core.headers.get('x-ratelimit-resource')).toBe('core');
    expect(rate(core.headers)).toMatchObject({ limit: 50, remaining: 49 });
    const all = (await get(`${fake.url}/rate_limit`, auth(ALICE_REPO))).json<RateLimitAll>();
    expect(all.resources.search).toMatchObject({ remaining: 0, used: 3 });
    expect(all.resources.core).toMatchObject({ remaining: 49, used: 1 });
    // Another token's search budget is its own.
    expect((await get(`${fake.url}/search/users?q=ali`, auth(BOB_PUBLIC))).status).toBe(200);
  });

  it('code search is its own resource and needs credentials', async () => {
    const found = await get(`${fake.url}/search/code?q=etagere`, auth(ALICE_REPO));
    expect(found.status).toBe(200);
    expect(found.headers.get('x-ratelimit-resource')).toBe('code_search');
    expect(found.json()).toEqual({ total_count: 0, incomplete_results: false, items: [] });
    expect((await get(`${fake.url}/search/code?q=etagere`)).status).toBe(401);
    const all = (await get(`${fake.url}/rate_limit`, auth(ALICE_REPO))).json<RateLimitAll>();
    expect(all.resources.code_search).toMatchObject({ used: 1 });
    expect(all.resources.search).toMatchObject({ used: 0 });
  });

  it('hostile search input: a missing or empty q is a 422, never a crash', async () => {
    // Five searches, spread over two tokens (3 each a window here); a 422 spends search quota too.
    for (const [index, query] of ['', '?q=', '?q=%20', '?per_page=9999&q=', '?q=%ZZ'].entries()) {
      const answer = await get(`${fake.url}/search/repositories${query}`, auth(index < 3 ? ALICE_REPO : BOB_PUBLIC));
      expect([200, 422]).toContain(answer.status);
      if (answer.status === 422) expect(answer.json<ErrorBody>().message).toBe('Validation Failed');
    }
    expect((await get(`${fake.url}/search/nothing?q=a`, auth(BOB_PUBLIC))).status).toBe(404);
    expect((await get(`${fake.url}/users/octocat`)).status).toBe(200);
  });

  it('POST /graphql spends graphql points and needs credentials', async () => {
    const answer = await fetch(`${fake.url}/graphql`, {
      method: 'POST',
      headers: auth(ALICE_REPO),
      body: JSON.stringify({ query: '{ viewer { login } }' }),
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-ratelimit-resource')).toBe('graphql');
    expect(await answer.json()).toEqual({ data: { viewer: { login: 'alice' } } });
    const anonymous = await fetch(`${fake.url}/graphql`, { method: 'POST', body: '{}' });
    expect(anonymous.status).toBe(401);
    await anonymous.body?.cancel();
  });
});

describe('fake upstream: App-only endpoints and revoked tokens', () => {
  const fake = useFake({});
  afterEach(() => fake.reset());

  it('GET /app and /repos/:o/:r/installation answer 401 to a valid token, whose /rate_limit still answers 200', async () => {
    for (const path of ['/app', '/repos/octocat/hello-world/installation']) {
      const answer = await get(`${fake.url}${path}`, auth(ALICE_REPO));
      expect(answer.status, path).toBe(401);
      expect(answer.json<ErrorBody>().message).toBe('A JSON web token could not be decoded');
      expect(answer.headers.get('x-ratelimit-resource')).toBe('core');
    }
    expect((await get(`${fake.url}/rate_limit`, auth(ALICE_REPO))).status).toBe(200);
    expect((await get(`${fake.url}/users/octocat`, auth(ALICE_REPO))).status).toBe(200);
  });

  it('POST /__fake/tokens revokes a token (401 Bad credentials everywhere, /rate_limit too) and restores it', async () => {
    const revoked = await post(`${fake.url}/__fake/tokens`, { token: 'alice', revoked: true });
    expect(revoked.status).toBe(200);
    expect(revoked.json()).toEqual({ revoked: 2 }); // both of alice's tokens
    for (const path of ['/users/octocat', '/rate_limit']) {
      const answer = await get(`${fake.url}${path}`, auth(ALICE_REPO));
      expect(answer.status).toBe(401);
      expect(answer.json<ErrorBody>().message).toBe('Bad credentials');
    }
    expect((await get(`${fake.url}/users/octocat`, auth(BOB_PUBLIC))).status).toBe(200);
    await post(`${fake.url}/__fake/tokens`, { token: ALICE_REPO, revoked: false });
    expect((await get(`${fake.url}/rate_limit`, auth(ALICE_REPO))).status).toBe(200);
    // reset restores every token
    await post(`${fake.url}/__fake/tokens`, { token: 'bob', revoked: true });
    fake.reset();
    expect((await get(`${fake.url}/rate_limit`, auth(BOB_PUBLIC))).status).toBe(200);
  });

  it('bad revocation input is a 400 or 404 JSON', async () => {
    const cases: Array<[unknown, number]> = [
      [{ token: '', revoked: true }, 400],
      [{ token: 'alice' }, 400],
      [{ token: 'alice', revoked: 'yes' }, 400],
      [{ token: 'alice', revoked: true, extra: 1 }, 400],
      [{ token: 'nobody-at-all', revoked: true }, 404],
    ];
    for (const [body, status] of cases) expect((await post(`${fake.url}/__fake/tokens`, body)).status, JSON.stringify(body)).toBe(status);
    expect((await get(`${fake.url}/users/octocat`, auth(ALICE_REPO))).status).toBe(200);
  });
});
