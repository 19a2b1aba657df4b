/**
 * With zero configuration (only the upstream URL, no public_url, no
 * trust_forwarded), Link and Location point back at the proxy, through the request's own Host, so
 * that real clients that paginate or follow a redirect stay on the proxy. The proxy holds pool
 * tokens and the clients none: a request that reached the fake without going through the proxy
 * would be anonymous, so the fake's counters show that none bypassed it.
 */
import { Octokit } from '@octokit/rest';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { rawGet } from '../fake-upstream/helpers.js';
import { expectAllThroughProxy } from '../helpers/clients.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
const HELLO_ID = 1296269;

async function rename(fake: FakeUpstream, path: string, name: string): Promise<void> {
  const res = await fetch(`${fake.url}/__fake/rename`, { method: 'POST', body: JSON.stringify({ path, name }) });
  expect(res.status).toBe(200);
}

/** The fake's logins of the pool's tokens: a request on anything else did not come through the proxy. */
const POOL_LOGINS = ['alice', 'bob'];

describe('zero-config proxy: Link and Location keep clients on the proxy', () => {
  let fake: FakeUpstream;
  let scripted: ScriptedUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    // One scope for both tokens: the pool is equivalent, so every page of a walk sees the same org
    // (with `repo`, alice also sees its private repositories and the pages would disagree).
    fake = await startFakeUpstream({ tokens: parseTokenSpec('zc_pool_one@alice:public_repo,zc_pool_two@bob:public_repo') });
    let base = '';
    scripted = await startScriptedUpstream((req: IncomingMessage, res: ServerResponse) => {
      const json = { 'content-type': 'application/json; charset=utf-8' };
      if (req.method === 'POST') {
        res.writeHead(201, { ...json, location: `${base}/things/7`, link: `<${base}/things?page=2>; rel="next"` });
        res.end('{"id":7}');
      } else if (req.url === '/away') {
        res.writeHead(302, { ...json, location: 'https://elsewhere.example/x', link: '<https://elsewhere.example/y>; rel="help"' });
        res.end('{}');
      } else if (req.url === '/ok') {
        res.writeHead(200, { ...json, location: `${base}/not-a-redirect` });
        res.end('{}');
      } else {
        res.writeHead(301, { ...json, location: `${base}/things/7` });
        res.end('{}');
      }
    });
    base = scripted.url;
    proxy = await startTestProxy({
      upstreams: [
        { name: 'github', prefix: '/', url: fake.url, token_pool: true },
        { name: 'raw', prefix: '/raw', url: fake.url, strip_prefix: true, token_pool: true, cache: { policy: 'none' } },
        { name: 'scripted', prefix: '/s', url: scripted.url, strip_prefix: true, pass_through: true },
      ],
      pool: {
        tokens: [
          { name: 'one', value: 'zc_pool_one' },
          { name: 'two', value: 'zc_pool_two' },
        ],
      },
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
    await scripted?.close();
  });
  beforeEach(() => {
    fake.reset();
  });

  it('a renamed repository’s 301 carries a Location on the proxy, and following it works through the pool', async () => {
    await rename(fake, '/repos/octocat/hello-world', 'hello-universe');
    const moved = await fetch(`${proxy.url}/repos/octocat/hello-world`, { redirect: 'manual' });
    expect(moved.status).toBe(301);
    expect(moved.headers.get('location')).toBe(`${proxy.url}/repositories/${HELLO_ID}`);
    expect(((await moved.json()) as { message: string }).message).toBe('Moved Permanently');
    // A client that follows redirects (fetch's default) lands on the proxy, and gets the repository.
    const followed = await fetch(`${proxy.url}/repos/octocat/hello-world`);
    expect(followed.status).toBe(200);
    expect(followed.url).toBe(`${proxy.url}/repositories/${HELLO_ID}`);
    expect(((await followed.json()) as { full_name: string }).full_name).toBe('octocat/hello-universe');
    expect(fake.stats().byPath[`/repositories/${HELLO_ID}`]).toBeGreaterThanOrEqual(1);
    expectAllThroughProxy(fake, POOL_LOGINS);
  });

  it('Octokit follows the redirect on the proxy', async () => {
    await rename(fake, '/repos/octocat/linguist', 'tongues');
    const octokit = new Octokit({ baseUrl: proxy.url, log: quiet });
    const { data } = await octokit.repos.get({ owner: 'octocat', repo: 'linguist' });
    expect(data.full_name).toBe('octocat/tongues');
    expect(fake.stats().byStatus['301']).toBe(1);
    expectAllThroughProxy(fake, POOL_LOGINS);
  });

  it('a streamed answer (policy none) rewrites its Location too, with the stripped prefix', async () => {
    await rename(fake, '/repos/octocat/spoon-knife', 'spork');
    const moved = await fetch(`${proxy.url}/raw/repos/octocat/spoon-knife`, { redirect: 'manual' });
    expect(moved.status).toBe(301);
    expect(moved.headers.get('location')).toMatch(new RegExp(`^${proxy.url}/raw/repositories/\\d+$`));
    const followed = await fetch(`${proxy.url}/raw/repos/octocat/spoon-knife`);
    expect(((await followed.json()) as { full_name: string }).full_name).toBe('octocat/spork');
    expectAllThroughProxy(fake, POOL_LOGINS);
  });

  it('Octokit paginate stays on the proxy for pages 2 and 3', async () => {
    const octokit = new Octokit({ baseUrl: proxy.url, log: quiet });
    const repos = await octokit.paginate(octokit.repos.listForOrg, { org: 'etagere-org', per_page: 30 });
    expect(repos).toHaveLength(75);
    expect(new Set(repos.map((repo) => repo.id)).size).toBe(75);
    expect(fake.stats().byPath['/orgs/etagere-org/repos']).toBe(3);
    expectAllThroughProxy(fake, POOL_LOGINS);
  });

  it('pass-through: the Location of a 201 and of a redirect point at the proxy; other hosts are left alone', async () => {
    const created = await fetch(`${proxy.url}/s/things`, { method: 'POST', body: '{}', redirect: 'manual' });
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`${proxy.url}/s/things/7`);
    expect(created.headers.get('link')).toBe(`<${proxy.url}/s/things?page=2>; rel="next"`);
    const away = await fetch(`${proxy.url}/s/away`, { redirect: 'manual' });
    expect(away.status).toBe(302);
    expect(away.headers.get('location')).toBe('https://elsewhere.example/x');
    expect(away.headers.get('link')).toBe('<https://elsewhere.example/y>; rel="help"');
    const moved = await fetch(`${proxy.url}/s/moved`, { redirect: 'manual' });
    expect(moved.headers.get('location')).toBe(`${proxy.url}/s/things/7`);
    // A Location on a 200 is not a redirect: left as the upstream sent it.
    const ok = await fetch(`${proxy.url}/s/ok`);
    expect(ok.headers.get('location')).toBe(`${scripted.url}/not-a-redirect`);
  });

  it('hostile: another client’s Host never reaches a cached answer; a Host that is not host[:port] is never reflected', async () => {
    const path = '/orgs/etagere-org/repos?per_page=10';
    const port = new URL(proxy.url).port;
    const first = await rawGet(`${proxy.url}${path}`, { host: 'evil.example:1' });
    expect(first.status).toBe(200);
    expect(String(first.headers.link)).toContain('<http://evil.example:1/orgs/etagere-org/repos?per_page=10&page=2>');
    const second = await rawGet(`${proxy.url}${path}`, { host: `127.0.0.1:${port}` });
    expect(String(second.headers['cache-status'])).toMatch(/hit/);
    expect(String(second.headers.link)).toContain(`<${proxy.url}/orgs/etagere-org/repos?per_page=10&page=2>`);
    expect(String(second.headers.link)).not.toContain('evil');
    for (const host of ['ev!l.example', "ev'il.example", 'evil.example:99999', 'a%2Fb.example', 'evil.example:']) {
      const res = await rawGet(`${proxy.url}${path}`, { host, 'x-forwarded-host': 'forwarded.example' });
      expect(res.status, host).toBe(200);
      const link = String(res.headers.link);
      expect(link, host).not.toContain(host);
      expect(link, host).not.toContain('forwarded.example');
      expect(link, host).toContain(`<${fake.url}/orgs/`); // no safe base: left as the upstream sent it
    }
    const bad = await rawGet(`${proxy.url}${path}`, { host: 'evil.example/path' });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.headers)).not.toContain('evil.example/path');
    expectAllThroughProxy(fake, POOL_LOGINS);
  });
});
