import { describe, expect, it } from 'vitest';
import { CITIES } from '../../fake-github/index.js';
import {
  ALICE_REPO,
  ISO,
  REPO_FIELDS,
  REPO_URL_FIELDS,
  SUMMARY_FIELDS,
  USER_FIELDS,
  auth,
  get,
  rate,
  rawGet,
  urlFields,
  useFake,
  type AccountBody,
  type ErrorBody,
  type RateLimitBody,
  type RepoBody,
} from './helpers.js';

describe('fake upstream: endpoints, records and headers', () => {
  const fake = useFake({ anonymousLimit: 100_000, tokenLimit: 100_000 });

  it('listens on a random loopback port and reports a URL without trailing slash', () => {
    expect(fake.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(fake.server.listening).toBe(true);
  });

  it('GET /users/:username returns the user record with every field', async () => {
    const response = await get(`${fake.url}/users/octocat`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const user = response.json<AccountBody>();
    for (const field of [...USER_FIELDS, ...SUMMARY_FIELDS]) expect(user, field).toHaveProperty(field);
    expect(user.login).toBe('octocat');
    expect(user.type).toBe('User');
    expect(user.gravatar_id).toBe('');
    expect(Buffer.from(user.node_id, 'base64').toString()).toBe(`04:User${user.id}`);
    expect(user.url).toBe(`${fake.url}/users/octocat`);
    expect(user.created_at).toMatch(ISO);
    expect(user.updated_at).toMatch(ISO);
    // logins are case-insensitive, as on GitHub
    expect((await get(`${fake.url}/users/OctoCat`)).json<AccountBody>().login).toBe('octocat');
  });

  it('GET /users/:org returns the organization as an account of type Organization', async () => {
    const response = await get(`${fake.url}/users/etagere-org`);
    expect(response.status).toBe(200);
    expect(response.json<AccountBody>().type).toBe('Organization');
  });

  it('GET /user returns the own profile with personal information', async () => {
    const response = await get(`${fake.url}/user`, auth(ALICE_REPO));
    expect(response.status).toBe(200);
    const user = response.json<AccountBody>();
    expect(user.login).toBe('alice');
    for (const field of [
      ...SUMMARY_FIELDS,
      'name',
      'email',
      'private_gists',
      'total_private_repos',
      'owned_private_repos',
      'plan',
      'two_factor_authentication',
    ]) {
      expect(user, field).toHaveProperty(field);
    }
    expect(user.email).toBe('alice@example.com');
    expect(user.total_private_repos).toBe(1);
    // the public record does not carry the personal fields
    const pub = (await get(`${fake.url}/users/alice`)).json();
    expect(pub).not.toHaveProperty('private_gists');
    expect(pub).not.toHaveProperty('plan');
  });

  it('GET /repos/:owner/:repo returns the repository with every field of the interface', async () => {
    const response = await get(`${fake.url}/repos/octocat/hello-world`);
    expect(response.status).toBe(200);
    const repo = response.json<RepoBody>();
    for (const field of REPO_FIELDS) expect(repo, field).toHaveProperty(field);
    for (const field of SUMMARY_FIELDS) expect(repo.owner, `owner.${field}`).toHaveProperty(field);
    expect(Object.keys(repo.owner)[0]).toBe('login');
    expect(repo.full_name).toBe('octocat/hello-world');
    expect(repo.private).toBe(false);
    expect(repo.fork).toBe(false);
    expect(repo.mirror_url).toBeNull();
    expect(repo.temp_clone_token).toBeNull();
    expect(repo).not.toHaveProperty('organization');
    expect(repo).not.toHaveProperty('permissions');
    for (const field of ['created_at', 'updated_at', 'pushed_at']) expect(repo[field]).toMatch(ISO);
    for (const field of [
      'size',
      'stargazers_count',
      'watchers_count',
      'forks_count',
      'open_issues_count',
      'forks',
      'open_issues',
      'watchers',
      'network_count',
      'subscribers_count',
    ]) {
      expect(Number.isInteger(repo[field]), field).toBe(true);
    }
    for (const field of ['has_issues', 'has_projects', 'has_downloads', 'has_wiki', 'has_pages', 'archived', 'disabled']) {
      expect(typeof repo[field], field).toBe('boolean');
    }
    for (const field of ['description', 'homepage', 'language', 'default_branch']) expect(typeof repo[field], field).toBe('string');
    expect(Object.keys(repo.license).sort()).toEqual(['key', 'name', 'node_id', 'spdx_id', 'url']);
    expect(repo.license.spdx_id).toBe('MIT');
    // URI templates like GitHub's
    expect(repo.issues_url).toBe(`${fake.url}/repos/octocat/hello-world/issues{/number}`);
    expect(repo.contents_url).toBe(`${fake.url}/repos/octocat/hello-world/contents/{+path}`);
    expect(repo.compare_url).toBe(`${fake.url}/repos/octocat/hello-world/compare/{base}...{head}`);
    expect(repo.notifications_url).toBe(`${fake.url}/repos/octocat/hello-world/notifications{?since,all,participating}`);
    expect(repo.owner.following_url).toBe(`${fake.url}/users/octocat/following{/other_user}`);
    expect(repo.owner.starred_url).toBe(`${fake.url}/users/octocat/starred{/owner}{/repo}`);
    expect(REPO_URL_FIELDS.every((f) => typeof repo[f] === 'string')).toBe(true);
  });

  it('an organization repository carries the organization summary', async () => {
    const repo = (await get(`${fake.url}/repos/etagere-org/repo-001`)).json<RepoBody>();
    expect(repo.owner.type).toBe('Organization');
    for (const field of SUMMARY_FIELDS) expect(repo.organization, `organization.${field}`).toHaveProperty(field);
    expect(repo.organization!.login).toBe('etagere-org');
  });

  it("every API *_url points at the base URL the request arrived at, and web addresses at GitHub's web", async () => {
    for (const path of [
      '/repos/octocat/hello-world',
      '/repos/etagere-org/repo-002',
      '/users/alice',
      '/orgs/etagere-org/repos',
      '/user/repos',
    ]) {
      const body = (await get(`${fake.url}${path}`, path.startsWith('/user/') ? auth(ALICE_REPO) : {})).json();
      const urls = urlFields(body).filter(([, v]) => v !== null);
      expect(urls.length).toBeGreaterThan(0);
      for (const [keyPath, url] of urls) {
        if (keyPath.endsWith('.git_url')) expect(url).toMatch(/^git:\/\/github\.com\//);
        else if (keyPath.endsWith('.ssh_url')) expect(url).toMatch(/^git@github\.com:/);
        else if (/\.(html_url|clone_url|svn_url)$/.test(keyPath)) expect(url).toMatch(/^https:\/\/github\.com\//);
        else if (keyPath.endsWith('.avatar_url')) expect(url).toMatch(/^https:\/\/avatars\.githubusercontent\.com\/u\/\d+\?v=4$/);
        else expect(String(url).startsWith(`${fake.url}/`), `${path} ${keyPath}=${String(url)}`).toBe(true);
      }
    }
    // Another Host header gives another base (the fake follows the request, e.g. behind port 0 or a proxy).
    const port = new URL(fake.url).port;
    const viaName = await rawGet(`${fake.url}/repos/octocat/hello-world`, { host: `localhost:${port}` });
    expect(JSON.parse(viaName.body).url).toBe(`http://localhost:${port}/repos/octocat/hello-world`);
    // A nonsensical Host falls back to the listening address.
    const odd = await rawGet(`${fake.url}/users/bob`, { host: 'bad host!' });
    expect(JSON.parse(odd.body).url).toBe(`${fake.url}/users/bob`);
  });

  it('sends every response header of the interface table with GitHub vendor names', async () => {
    const response = await get(`${fake.url}/repos/octocat/hello-world`);
    const headers = response.headers;
    expect(headers.get('date')).toMatch(/GMT$/);
    expect(headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(headers.get('server')).toBe('github.com');
    expect(headers.get('cache-control')).toBe('public, max-age=60, s-maxage=60');
    expect(headers.get('vary')).toBe('Accept, Authorization, Cookie, X-GitHub-OTP, Accept-Encoding, X-Requested-With');
    expect(headers.get('etag')).toMatch(/^W\/"[0-9a-f]{64}"$/);
    expect(new Date(headers.get('last-modified') ?? '').toISOString()).toBe('2024-06-20T10:00:00.000Z');
    expect(headers.get('x-github-media-type')).toBe('github.v3; format=json');
    const expose = (headers.get('access-control-expose-headers') ?? '').split(', ');
    for (const name of [
      'ETag',
      'Link',
      'Location',
      'Retry-After',
      'X-GitHub-OTP',
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Used',
      'X-RateLimit-Reset',
      'X-OAuth-Scopes',
      'X-Accepted-OAuth-Scopes',
      'X-Poll-Interval',
      'X-GitHub-Media-Type',
      'Deprecation',
      'Sunset',
    ]) {
      expect(expose).toContain(name);
    }
    expect(headers.get('access-control-allow-origin')).toBe('*');
    expect(headers.get('strict-transport-security')).toBe('max-age=31536000; includeSubdomains; preload');
    expect(headers.get('x-frame-options')).toBe('deny');
    expect(headers.get('x-content-type-options')).toBe('nosniff');
    expect(headers.get('x-xss-protection')).toBe('1; mode=block');
    expect(headers.get('referrer-policy')).toBe('origin-when-cross-origin, strict-origin-when-cross-origin');
    expect(headers.get('content-security-policy')).toBe("default-src 'none'");
    expect(headers.get('accept-ranges')).toBe('bytes');
    expect(Number(headers.get('content-length'))).toBe(Buffer.byteLength(response.text));
    expect(headers.get('x-github-request-id')).toMatch(/^[0-9A-F:]+$/);
    expect(headers.get('x-ratelimit-resource')).toBe('core');
    const rl = rate(headers);
    expect(rl.limit).toBe(rl.remaining + rl.used);
    expect(rl.reset).toBeGreaterThan(Date.now() / 1000);
    // No OAuth headers without credentials
    expect(headers.get('x-oauth-scopes')).toBeNull();
    // Request ids differ per request
    const again = await get(`${fake.url}/repos/octocat/hello-world`);
    expect(again.headers.get('x-github-request-id')).not.toBe(headers.get('x-github-request-id'));
  });

  it('authenticated responses are private and carry X-OAuth-Scopes and X-Accepted-OAuth-Scopes', async () => {
    const response = await get(`${fake.url}/repos/octocat/hello-world`, auth(ALICE_REPO));
    expect(response.headers.get('cache-control')).toBe('private, max-age=60, s-maxage=60');
    expect(response.headers.get('x-oauth-scopes')).toBe('repo, read:org');
    expect(response.headers.get('x-accepted-oauth-scopes')).toBe('repo');
    expect(response.json<RepoBody>().permissions).toEqual({ admin: false, maintain: false, push: false, triage: false, pull: true });
    expect(rate(response.headers).limit).toBe(100_000);
  });

  it('Bearer and Basic (token in the password position) credentials work like `token`', async () => {
    const bearer = await get(`${fake.url}/user`, { authorization: `Bearer ${ALICE_REPO}` });
    expect(bearer.status).toBe(200);
    expect(bearer.json<AccountBody>().login).toBe('alice');
    const basic = await get(`${fake.url}/user`, {
      authorization: `Basic ${Buffer.from(`alice:${ALICE_REPO}`).toString('base64')}`,
    });
    expect(basic.status).toBe(200);
    expect(basic.json<AccountBody>().login).toBe('alice');
  });

  it('GET /zen answers a plain-text saying that rotates and costs quota', async () => {
    const first = await get(`${fake.url}/zen`);
    const second = await get(`${fake.url}/zen`);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(first.text.length).toBeGreaterThan(3);
    expect(second.text).not.toBe(first.text);
    expect(rate(second.headers).used).toBe(rate(first.headers).used + 1);
    expect(first.headers.get('etag')).toBeNull();
  });

  it('GET /rate_limit is GitHub-shaped and spends no quota', async () => {
    await get(`${fake.url}/users/bob`, auth(ALICE_REPO));
    const first = await get(`${fake.url}/rate_limit`, auth(ALICE_REPO));
    const second = await get(`${fake.url}/rate_limit`, auth(ALICE_REPO));
    expect(first.status).toBe(200);
    const body = first.json<RateLimitBody>();
    expect(Object.keys(body.resources.core).sort()).toEqual(['limit', 'remaining', 'reset', 'resource', 'used']);
    expect(body.rate).toEqual(body.resources.core);
    expect(body.resources.core.resource).toBe('core');
    expect(body.resources.core.limit).toBe(body.resources.core.remaining + body.resources.core.used);
    expect(second.json<RateLimitBody>().resources.core.used).toBe(body.resources.core.used);
    expect(rate(second.headers).remaining).toBe(rate(first.headers).remaining);
    expect(body.resources.core.used).toBeGreaterThanOrEqual(1);
  });

  it('HEAD behaves as GET without a body, with the same headers including content-length', async () => {
    const viaGet = await get(`${fake.url}/repos/octocat/hello-world`);
    const viaHead = await get(`${fake.url}/repos/octocat/hello-world`, {}, 'HEAD');
    expect(viaHead.status).toBe(200);
    expect(viaHead.text).toBe('');
    // hop-by-hop headers are Node's transport business, not the fake's
    const skip = new Set(['date', 'connection', 'keep-alive', 'x-github-request-id', 'x-ratelimit-remaining', 'x-ratelimit-used']);
    const names = (headers: Headers): string[] => [...headers.keys()].filter((name) => !skip.has(name)).sort();
    expect(names(viaHead.headers)).toEqual(names(viaGet.headers));
    for (const name of names(viaGet.headers)) expect(viaHead.headers.get(name), name).toBe(viaGet.headers.get(name));
    expect(viaHead.headers.get('content-length')).toBe(String(Buffer.byteLength(viaGet.text)));
    expect(rate(viaHead.headers).used).toBe(rate(viaGet.headers).used + 1);
  });

  it('unknown users, repos, orgs and paths answer 404 JSON like GitHub', async () => {
    for (const path of [
      '/users/nobody-here',
      '/repos/octocat/nope',
      '/orgs/nope/repos',
      '/orgs/alice/repos',
      '/nothing',
      '/repos/octocat/hello-world/',
      '/users/%E0%A4%A',
    ]) {
      const response = await get(`${fake.url}${path}`);
      expect(response.status, path).toBe(404);
      expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(response.json()).toEqual({ message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
    }
  });

  it('other methods on API paths answer 404 JSON (as GitHub does); OPTIONS is a CORS preflight', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const response = await get(`${fake.url}/repos/octocat/hello-world`, {}, method);
      expect(response.status, method).toBe(404);
      expect(response.json<ErrorBody>().message).toBe('Not Found');
    }
    const preflight = await get(`${fake.url}/repos/octocat/hello-world`, {}, 'OPTIONS');
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(preflight.headers.get('access-control-allow-headers')).toContain('Authorization');
  });

  it('the cyclist service answers text/plain counts without ETag, quota or rate-limit headers', async () => {
    const before = rate((await get(`${fake.url}/users/bob`)).headers).used;
    for (const city of CITIES) {
      const response = await get(`${fake.url}/bicyclists/${city}`);
      expect(response.status, city).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(response.text).toMatch(/^\d+$/);
      expect(response.headers.get('etag')).toBeNull();
      expect(response.headers.get('last-modified')).toBeNull();
      expect([...response.headers.keys()].filter((k) => k.startsWith('x-ratelimit'))).toEqual([]);
    }
    expect(CITIES).toHaveLength(7);
    const after = rate((await get(`${fake.url}/users/bob`)).headers).used;
    expect(after).toBe(before + 1); // only the /users/bob request itself
    const head = await get(`${fake.url}/bicyclists/helsinki`, {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    const unknown = await get(`${fake.url}/bicyclists/atlantis`);
    expect(unknown.status).toBe(404);
    expect(unknown.json<ErrorBody>().message).toBe('Not Found');
    expect((await get(`${fake.url}/bicyclists`)).status).toBe(404);
    expect((await get(`${fake.url}/bicyclists/helsinki`, {}, 'POST')).status).toBe(405);
  });
});
