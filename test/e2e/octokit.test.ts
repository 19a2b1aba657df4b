/**
 * End to end with @octokit/rest: every endpoint of the fake, through the proxy, as a real client
 * library sees them (pagination over rewritten Link headers, errors as RequestError).
 */
import { Octokit } from '@octokit/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

const TOKEN_ALICE = 'demo_token_alice_repo';
const TOKEN_BOB = 'demo_token_bob_public';
const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
const basic = (user: string, token: string) => `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;

describe('octokit through the proxy', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  let anon: Octokit;
  let alice: Octokit;
  let bob: Octokit;

  beforeAll(async () => {
    fake = await startFakeUpstream({ port: 0, anonymousLimit: 100_000, tokenLimit: 100_000 });
    proxy = await startTestProxy({
      trust_forwarded: true,
      upstreams: [
        { name: 'api', prefix: '/', url: fake.url },
        { name: 'cyclists', prefix: '/bicyclists', url: fake.url, cache: { policy: 'ttl', ttl_seconds: 30 } },
      ],
    });
    anon = new Octokit({ baseUrl: proxy.url, log: quiet });
    alice = new Octokit({ baseUrl: proxy.url, auth: TOKEN_ALICE, log: quiet });
    bob = new Octokit({ baseUrl: proxy.url, auth: TOKEN_BOB, log: quiet });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('GET /zen answers text through the proxy', async () => {
    const res = await anon.request('GET /zen');
    expect(res.status).toBe(200);
    expect(typeof res.data).toBe('string');
    expect((res.data as string).length).toBeGreaterThan(0);
  });

  it('users.getByUsername', async () => {
    const { status, data } = await anon.users.getByUsername({ username: 'octocat' });
    expect(status).toBe(200);
    expect(data.login).toBe('octocat');
    expect(data.id).toBe(583231);
    const org = await anon.users.getByUsername({ username: 'etagere-org' });
    expect(org.data.type).toBe('Organization');
  });

  it('users.getAuthenticated with a token', async () => {
    const { status, data, headers } = await alice.users.getAuthenticated();
    expect(status).toBe(200);
    expect(data.login).toBe('alice');
    expect(headers['cache-status']).toMatch(/^etagere; /);
  });

  it('users.getAuthenticated with Basic auth (per-call header)', async () => {
    const { status, data } = await anon.users.getAuthenticated({ headers: { authorization: basic('alice', TOKEN_ALICE) } });
    expect(status).toBe(200);
    expect(data.login).toBe('alice');
    const asBob = await anon.users.getAuthenticated({ headers: { authorization: basic('bob', TOKEN_BOB) } });
    expect(asBob.data.login).toBe('bob');
  });

  it('users.getAuthenticated with Basic auth (client-wide default header)', async () => {
    const client = new Octokit({ baseUrl: proxy.url, log: quiet });
    const withBasic = client.request.defaults({ headers: { authorization: basic('alice', TOKEN_ALICE) } });
    const { data } = await withBasic('GET /user');
    expect((data as { login: string }).login).toBe('alice');
  });

  it('repos.get', async () => {
    const { status, data } = await anon.repos.get({ owner: 'octocat', repo: 'hello-world' });
    expect(status).toBe(200);
    expect(data.id).toBe(1296269);
    expect(data.full_name.toLowerCase()).toBe('octocat/hello-world');
  });

  it('repos.listForAuthenticatedUser shows private repos with repo scope only', async () => {
    const aliceRepos = await alice.paginate(alice.repos.listForAuthenticatedUser, { per_page: 100 });
    const names = aliceRepos.map((r) => r.full_name.toLowerCase());
    expect(names).toContain('alice/secret-project');
    expect(names).toContain('etagere-org/internal-tools');
    expect(aliceRepos.some((r) => r.private)).toBe(true);
    const bobRepos = await bob.paginate(bob.repos.listForAuthenticatedUser, { per_page: 100 });
    expect(bobRepos.length).toBeGreaterThan(0);
    expect(bobRepos.every((r) => !r.private)).toBe(true);
  });

  it('repos.listForUser', async () => {
    const { data } = await anon.repos.listForUser({ username: 'alice' });
    const names = data.map((r) => r.name).sort();
    expect(names).toEqual(['dotfiles', 'website']);
    const withScope = await alice.repos.listForUser({ username: 'alice' });
    expect(withScope.data.map((r) => r.name)).toContain('secret-project');
  });

  it('repos.listForOrg paginates all 75 public repos through the proxy', async () => {
    const before = fake.stats().byPath['/orgs/etagere-org/repos'] ?? 0;
    const pages: Array<{ url: string; link: string | undefined }> = [];
    const repos = [];
    for await (const page of anon.paginate.iterator(anon.repos.listForOrg, { org: 'etagere-org', per_page: 30 })) {
      pages.push({ url: page.url, link: page.headers.link });
      repos.push(...page.data);
    }
    expect(repos).toHaveLength(75);
    expect(new Set(repos.map((r) => r.name)).size).toBe(75);
    expect(repos.every((r) => !r.private)).toBe(true);
    expect(pages).toHaveLength(3);
    for (const page of pages) {
      expect(page.url.startsWith(proxy.url)).toBe(true);
      expect(page.link).toBeDefined();
      expect(page.link).not.toContain(fake.url);
      for (const match of page.link!.matchAll(/<([^>]*)>/g)) expect(match[1]!.startsWith(`${proxy.url}/`)).toBe(true);
    }
    expect((fake.stats().byPath['/orgs/etagere-org/repos'] ?? 0) - before).toBe(3);
    // The same walk again is served from cache.
    const again = await anon.paginate(anon.repos.listForOrg, { org: 'etagere-org', per_page: 30 });
    expect(again).toHaveLength(75);
    expect((fake.stats().byPath['/orgs/etagere-org/repos'] ?? 0) - before).toBe(3);
  });

  it('/bicyclists/<city> through the ttl upstream', async () => {
    const res = await anon.request('GET /bicyclists/{city}', { city: 'helsinki' });
    expect(res.status).toBe(200);
    expect(String(res.data)).toBe('31415');
    const again = await anon.request('GET /bicyclists/{city}', { city: 'helsinki' });
    expect(String(again.data)).toBe('31415');
    expect(again.headers['cache-status']).toMatch(/hit/);
  });

  it('a bad token reaches Octokit as a 401 RequestError', async () => {
    const bad = new Octokit({ baseUrl: proxy.url, auth: 'demo_token_nobody', log: quiet });
    await expect(bad.users.getByUsername({ username: 'octocat' })).rejects.toMatchObject({ name: 'HttpError', status: 401 });
  });

  it('/user without auth is a 401', async () => {
    await expect(anon.users.getAuthenticated()).rejects.toMatchObject({ status: 401 });
  });

  it('an unknown repository is a 404', async () => {
    await expect(anon.repos.get({ owner: 'octocat', repo: 'no-such-repo' })).rejects.toMatchObject({ status: 404 });
    // A private repository is a 404 for anyone who may not see it.
    await expect(bob.repos.get({ owner: 'alice', repo: 'secret-project' })).rejects.toMatchObject({ status: 404 });
    const ok = await alice.repos.get({ owner: 'alice', repo: 'secret-project' });
    expect(ok.data.private).toBe(true);
  });
});
