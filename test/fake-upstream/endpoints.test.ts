import { describe, expect, it } from 'vitest';
import { CITIES } from '../../src/fake-upstream/index.js';
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
} from './helpers.js';

describe('fake upstream: endpoints, records and headers', () => {
  const fake = useFake({ anonymousLimit: 100_000, tokenLimit: 100_000 });

  it('listens on a random loopback port and reports a URL without trailing slash', () => {
    expect(fake.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(fake.server.listening).toBe(true);
  });

  it('GET /users/:username returns the user record with every field', async () => {
    const r = await get(`${fake.url}/users/octocat`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const u = r.json();
    for (const f of [...USER_FIELDS, ...SUMMARY_FIELDS]) expect(u, f).toHaveProperty(f);
    expect(u.login).toBe('octocat');
    expect(u.type).toBe('User');
    expect(u.gravatar_id).toBe('');
    expect(Buffer.from(u.node_id, 'base64').toString()).toBe(`04:User${u.id}`);
    expect(u.url).toBe(`${fake.url}/users/octocat`);
    expect(u.created_at).toMatch(ISO);
    expect(u.updated_at).toMatch(ISO);
    // logins are case-insensitive, as on GitHub
    expect((await get(`${fake.url}/users/OctoCat`)).json().login).toBe('octocat');
  });

  it('GET /users/:org returns the organization as an account of type Organization', async () => {
    const r = await get(`${fake.url}/users/etagere-org`);
    expect(r.status).toBe(200);
    expect(r.json().type).toBe('Organization');
  });

  it('GET /user returns the own profile with personal information', async () => {
    const r = await get(`${fake.url}/user`, auth(ALICE_REPO));
    expect(r.status).toBe(200);
    const u = r.json();
    expect(u.login).toBe('alice');
    for (const f of [
      ...SUMMARY_FIELDS,
      'name',
      'email',
      'private_gists',
      'total_private_repos',
      'owned_private_repos',
      'plan',
      'two_factor_authentication',
    ]) {
      expect(u, f).toHaveProperty(f);
    }
    expect(u.email).toBe('alice@example.com');
    expect(u.total_private_repos).toBe(1);
    // the public record does not carry the personal fields
    const pub = (await get(`${fake.url}/users/alice`)).json();
    expect(pub).not.toHaveProperty('private_gists');
    expect(pub).not.toHaveProperty('plan');
  });

  it('GET /repos/:owner/:repo returns the repository with every field of the interface', async () => {
    const r = await get(`${fake.url}/repos/octocat/hello-world`);
    expect(r.status).toBe(200);
    const repo = r.json();
    for (const f of REPO_FIELDS) expect(repo, f).toHaveProperty(f);
    for (const f of SUMMARY_FIELDS) expect(repo.owner, `owner.${f}`).toHaveProperty(f);
    expect(Object.keys(repo.owner)[0]).toBe('login');
    expect(repo.full_name).toBe('octocat/hello-world');
    expect(repo.private).toBe(false);
    expect(repo.fork).toBe(false);
    expect(repo.mirror_url).toBeNull();
    expect(repo.temp_clone_token).toBeNull();
    expect(repo).not.toHaveProperty('organization');
    expect(repo).not.toHaveProperty('permissions');
    for (const f of ['created_at', 'updated_at', 'pushed_at']) expect(repo[f]).toMatch(ISO);
    for (const f of [
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
      expect(Number.isInteger(repo[f]), f).toBe(true);
    }
    for (const f of ['has_issues', 'has_projects', 'has_downloads', 'has_wiki', 'has_pages', 'archived', 'disabled']) {
      expect(typeof repo[f], f).toBe('boolean');
    }
    for (const f of ['description', 'homepage', 'language', 'default_branch']) expect(typeof repo[f], f).toBe('string');
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
    const repo = (await get(`${fake.url}/repos/etagere-org/repo-001`)).json();
    expect(repo.owner.type).toBe('Organization');
    for (const f of SUMMARY_FIELDS) expect(repo.organization, `organization.${f}`).toHaveProperty(f);
    expect(repo.organization.login).toBe('etagere-org');
  });

  it('every *_url points at the base URL the request arrived at', async () => {
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
      for (const [k, v] of urls) {
        if (k.endsWith('.git_url')) expect(v).toMatch(/^git:\/\/127\.0\.0\.1:\d+\//);
        else if (k.endsWith('.ssh_url')) expect(v).toMatch(/^git@127\.0\.0\.1:\d+:/);
        else expect(String(v).startsWith(`${fake.url}/`), `${path} ${k}=${String(v)}`).toBe(true);
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
    const r = await get(`${fake.url}/repos/octocat/hello-world`);
    const h = r.headers;
    expect(h.get('date')).toMatch(/GMT$/);
    expect(h.get('content-type')).toBe('application/json; charset=utf-8');
    expect(h.get('server')).toBe('github.com');
    expect(h.get('cache-control')).toBe('public, max-age=60, s-maxage=60');
    expect(h.get('vary')).toBe('Accept, Authorization, Cookie, X-GitHub-OTP, Accept-Encoding, X-Requested-With');
    expect(h.get('etag')).toMatch(/^W\/"[0-9a-f]{64}"$/);
    expect(new Date(h.get('last-modified') ?? '').toISOString()).toBe('2024-06-20T10:00:00.000Z');
    expect(h.get('x-github-media-type')).toBe('github.v3; format=json');
    const expose = (h.get('access-control-expose-headers') ?? '').split(', ');
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
    expect(h.get('access-control-allow-origin')).toBe('*');
    expect(h.get('strict-transport-security')).toBe('max-age=31536000; includeSubdomains; preload');
    expect(h.get('x-frame-options')).toBe('deny');
    expect(h.get('x-content-type-options')).toBe('nosniff');
    expect(h.get('x-xss-protection')).toBe('1; mode=block');
    expect(h.get('referrer-policy')).toBe('origin-when-cross-origin, strict-origin-when-cross-origin');
    expect(h.get('content-security-policy')).toBe("default-src 'none'");
    expect(h.get('accept-ranges')).toBe('bytes');
    expect(Number(h.get('content-length'))).toBe(Buffer.byteLength(r.text));
    expect(h.get('x-github-request-id')).toMatch(/^[0-9A-F:]+$/);
    expect(h.get('x-ratelimit-resource')).toBe('core');
    const rl = rate(h);
    expect(rl.limit).toBe(rl.remaining + rl.used);
    expect(rl.reset).toBeGreaterThan(Date.now() / 1000);
    // No OAuth headers without credentials
    expect(h.get('x-oauth-scopes')).toBeNull();
    // Request ids differ per request
    const again = await get(`${fake.url}/repos/octocat/hello-world`);
    expect(again.headers.get('x-github-request-id')).not.toBe(h.get('x-github-request-id'));
  });

  it('authenticated responses are private and carry X-OAuth-Scopes and X-Accepted-OAuth-Scopes', async () => {
    const r = await get(`${fake.url}/repos/octocat/hello-world`, auth(ALICE_REPO));
    expect(r.headers.get('cache-control')).toBe('private, max-age=60, s-maxage=60');
    expect(r.headers.get('x-oauth-scopes')).toBe('repo, read:org');
    expect(r.headers.get('x-accepted-oauth-scopes')).toBe('repo');
    expect(r.json().permissions).toEqual({ admin: false, maintain: false, push: false, triage: false, pull: true });
    expect(rate(r.headers).limit).toBe(100_000);
  });

  it('Bearer and Basic (token in the password position) credentials work like `token`', async () => {
    const bearer = await get(`${fake.url}/user`, { authorization: `Bearer ${ALICE_REPO}` });
    expect(bearer.status).toBe(200);
    expect(bearer.json().login).toBe('alice');
    const basic = await get(`${fake.url}/user`, {
      authorization: `Basic ${Buffer.from(`alice:${ALICE_REPO}`).toString('base64')}`,
    });
    expect(basic.status).toBe(200);
    expect(basic.json().login).toBe('alice');
  });

  it('GET /zen answers a plain-text saying that rotates and costs quota', async () => {
    const a = await get(`${fake.url}/zen`);
    const b = await get(`${fake.url}/zen`);
    expect(a.status).toBe(200);
    expect(a.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(a.text.length).toBeGreaterThan(3);
    expect(b.text).not.toBe(a.text);
    expect(rate(b.headers).used).toBe(rate(a.headers).used + 1);
    expect(a.headers.get('etag')).toBeNull();
  });

  it('GET /rate_limit is GitHub-shaped and spends no quota', async () => {
    await get(`${fake.url}/users/bob`, auth(ALICE_REPO));
    const a = await get(`${fake.url}/rate_limit`, auth(ALICE_REPO));
    const b = await get(`${fake.url}/rate_limit`, auth(ALICE_REPO));
    expect(a.status).toBe(200);
    const body = a.json();
    expect(Object.keys(body.resources.core).sort()).toEqual(['limit', 'remaining', 'reset', 'resource', 'used']);
    expect(body.rate).toEqual(body.resources.core);
    expect(body.resources.core.resource).toBe('core');
    expect(body.resources.core.limit).toBe(body.resources.core.remaining + body.resources.core.used);
    expect(b.json().resources.core.used).toBe(body.resources.core.used);
    expect(rate(b.headers).remaining).toBe(rate(a.headers).remaining);
    expect(body.resources.core.used).toBeGreaterThanOrEqual(1);
  });

  it('HEAD behaves as GET without a body, with the same headers including content-length', async () => {
    const g = await get(`${fake.url}/repos/octocat/hello-world`);
    const h = await get(`${fake.url}/repos/octocat/hello-world`, {}, 'HEAD');
    expect(h.status).toBe(200);
    expect(h.text).toBe('');
    // hop-by-hop headers are Node's transport business, not the fake's
    const skip = new Set(['date', 'connection', 'keep-alive', 'x-github-request-id', 'x-ratelimit-remaining', 'x-ratelimit-used']);
    const names = (hs: Headers): string[] => [...hs.keys()].filter((k) => !skip.has(k)).sort();
    expect(names(h.headers)).toEqual(names(g.headers));
    for (const k of names(g.headers)) expect(h.headers.get(k), k).toBe(g.headers.get(k));
    expect(h.headers.get('content-length')).toBe(String(Buffer.byteLength(g.text)));
    expect(rate(h.headers).used).toBe(rate(g.headers).used + 1);
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
      const r = await get(`${fake.url}${path}`);
      expect(r.status, path).toBe(404);
      expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(r.json()).toEqual({ message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
    }
  });

  it('other methods on API paths answer 404 JSON (as GitHub does); OPTIONS is a CORS preflight', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const r = await get(`${fake.url}/repos/octocat/hello-world`, {}, method);
      expect(r.status, method).toBe(404);
      expect(r.json().message).toBe('Not Found');
    }
    const o = await get(`${fake.url}/repos/octocat/hello-world`, {}, 'OPTIONS');
    expect(o.status).toBe(204);
    expect(o.headers.get('access-control-allow-origin')).toBe('*');
    expect(o.headers.get('access-control-allow-headers')).toContain('Authorization');
  });

  it('the cyclist service answers text/plain counts without ETag, quota or rate-limit headers', async () => {
    const before = rate((await get(`${fake.url}/users/bob`)).headers).used;
    for (const city of CITIES) {
      const r = await get(`${fake.url}/bicyclists/${city}`);
      expect(r.status, city).toBe(200);
      expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(r.text).toMatch(/^\d+$/);
      expect(r.headers.get('etag')).toBeNull();
      expect(r.headers.get('last-modified')).toBeNull();
      expect([...r.headers.keys()].filter((k) => k.startsWith('x-ratelimit'))).toEqual([]);
    }
    expect(CITIES).toHaveLength(7);
    const after = rate((await get(`${fake.url}/users/bob`)).headers).used;
    expect(after).toBe(before + 1); // only the /users/bob request itself
    const head = await get(`${fake.url}/bicyclists/helsinki`, {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    const unknown = await get(`${fake.url}/bicyclists/atlantis`);
    expect(unknown.status).toBe(404);
    expect(unknown.json().message).toBe('Not Found');
    expect((await get(`${fake.url}/bicyclists`)).status).toBe(404);
    expect((await get(`${fake.url}/bicyclists/helsinki`, {}, 'POST')).status).toBe(405);
  });
});
