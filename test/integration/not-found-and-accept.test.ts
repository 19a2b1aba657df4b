/**
 * Two REST leaks closed, against the fake: a 404 or 410 to a GET is stored in its credential
 * partition for `cache.negative_seconds` (served as a hit with GitHub's headers, purged by a
 * delivery that could create the path or by a 200 for its key; RFC 9111 rules under `rfc9111`), and
 * the Accept values that select GitHub's JSON share one entry while every other media type keeps
 * its own.
 */
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { get } from '../helpers/http.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';
import { answered, deliver, pointFakeAt } from '../helpers/webhooks.js';

const SECRET = testSecret('webhook secret of the not-found test', 'whsec-not-found-0123456789abcdef');
const ALICE = { authorization: 'token demo_token_alice_public' };
const CAROL = { authorization: 'token demo_token_carol_repo' };

const upstreamRequests = (fake: FakeUpstream, path: string): number => fake.stats().byPath[path] ?? 0;

async function createRepo(fake: FakeUpstream, owner: string, name: string): Promise<string[]> {
  const res = await request(`${fake.url}/__fake/repos`, { method: 'POST', body: JSON.stringify({ owner, name }) });
  expect(res.statusCode).toBe(201);
  return ((await res.body.json()) as { deliveries?: string[] }).deliveries ?? [];
}

describe('404s, cached briefly', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  let strict: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    const upstream = { name: 'github', prefix: '/', url: fake.url };
    proxy = await startTestProxy({ upstreams: [upstream], webhooks: { secret: SECRET } });
    strict = await startTestProxy({
      upstreams: [
        { ...upstream, name: 'off', prefix: '/off', strip_prefix: true, cache: { negative_seconds: 0 } },
        { ...upstream, name: 'rfc', prefix: '/rfc', strip_prefix: true, cache: { policy: 'rfc9111' } },
      ],
    });
  }, 30_000);
  afterAll(async () => {
    await proxy?.close();
    await strict?.close();
    await fake?.close();
  });
  beforeEach(() => fake.reset());

  it('100 reads of a missing repository make 1 upstream request; after its `repository created` delivery the next read goes upstream', async () => {
    await pointFakeAt(fake, proxy.url, SECRET);
    const path = '/repos/carol/tomorrow';
    const first = await get(proxy.url + path, CAROL);
    expect([first.status, first.headers['cache-status']]).toEqual([404, expect.stringMatching(/fwd=miss; fwd-status=404; ttl=60; stored/)]);
    for (let read = 1; read < 100; read++) {
      const again = await get(proxy.url + path, CAROL);
      expect([again.status, again.body]).toEqual([404, first.body]);
    }
    const hit = await get(proxy.url + path, CAROL);
    expect(hit.headers['cache-status']).toMatch(/^etagere; hit; ttl=\d+$/);
    // The headers GitHub sent: its request id, its scopes, its media type.
    for (const name of ['content-type', 'x-github-request-id', 'x-oauth-scopes', 'x-accepted-oauth-scopes', 'x-github-media-type'])
      expect([name, hit.headers[name]]).toEqual([name, first.headers[name]]);
    expect(upstreamRequests(fake, path)).toBe(1);
    // Another credential has a partition of its own.
    expect((await get(proxy.url + path, ALICE)).headers['cache-status']).toMatch(/fwd=miss/);
    expect(upstreamRequests(fake, path)).toBe(2);
    await answered(fake, await createRepo(fake, 'carol', 'tomorrow'));
    const created = await get(proxy.url + path, CAROL);
    expect([created.status, created.headers['cache-status']]).toEqual([200, expect.stringMatching(/fwd=miss; fwd-status=200/)]);
    expect(upstreamRequests(fake, path)).toBe(3);
  });

  it('a member added, or an organization member added, purges the 404s of what they may now see', async () => {
    const privateRepo = '/repos/etagere-org/roadmap';
    await get(proxy.url + privateRepo, CAROL); // carol is no member: 404
    await get(proxy.url + `${privateRepo}/readme`, CAROL);
    expect((await get(proxy.url + privateRepo, CAROL)).headers['cache-status']).toMatch(/hit/);
    const member = { action: 'added', member: { login: 'carol' }, repository: { full_name: 'etagere-org/roadmap' } };
    expect((await deliver(proxy.url, SECRET, 'member', member)).status).toBe(200);
    expect((await get(proxy.url + privateRepo, CAROL)).headers['cache-status']).toMatch(/fwd=miss/);
    expect((await get(proxy.url + `${privateRepo}/readme`, CAROL)).headers['cache-status']).toMatch(/fwd=miss/);
    await get(proxy.url + '/repos/etagere-org/internal-tools', CAROL);
    const joined = { action: 'member_added', membership: { user: { login: 'carol' } }, organization: { login: 'etagere-org' } };
    expect((await deliver(proxy.url, SECRET, 'organization', joined)).status).toBe(200);
    expect((await get(proxy.url + '/repos/etagere-org/internal-tools', CAROL)).headers['cache-status']).toMatch(/fwd=miss/);
  });

  it('a 200 for the key replaces its 404; a HEAD 404 is not stored', async () => {
    // (bob: an owner no delivery of this file purged within the last moment, which would keep the 404 from being stored)
    const path = '/repos/bob/soon';
    const off = await request(`${fake.url}/__fake/webhooks`, { method: 'POST', body: JSON.stringify({ url: null }) });
    await off.body.dump();
    await get(proxy.url + path, CAROL);
    await createRepo(fake, 'bob', 'soon'); // no webhook configured: nothing tells the proxy
    expect((await get(proxy.url + path, CAROL)).status).toBe(404);
    const forced = await get(proxy.url + path, { ...CAROL, 'cache-control': 'no-cache' });
    expect(forced.status).toBe(200);
    expect([(await get(proxy.url + path, CAROL)).status, upstreamRequests(fake, path)]).toEqual([200, 2]);
    const head = await request(`${proxy.url}/repos/bob/never`, { method: 'HEAD', headers: CAROL });
    expect(head.statusCode).toBe(404);
    await head.body.dump();
    expect((await get(`${proxy.url}/repos/bob/never`, CAROL)).headers['cache-status']).toMatch(/fwd=miss/);
  });

  it('negative_seconds: 0 stores none; under rfc9111 a 404 without freshness is not stored', async () => {
    for (const prefix of ['/off', '/rfc']) {
      await get(`${strict.url}${prefix}/repos/carol/nothing`, CAROL);
      expect((await get(`${strict.url}${prefix}/repos/carol/nothing`, CAROL)).headers['cache-status']).toMatch(/fwd=miss/);
    }
    expect(upstreamRequests(fake, '/repos/carol/nothing')).toBe(4);
  });
});

describe('equivalent Accept values share one entry', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  const readme = '/repos/octocat/hello-world/readme';

  beforeAll(async () => {
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000 });
    // GitHub is the upstream with the token pool (api.github.com, or Enterprise Server's /api/v3, would be too).
    proxy = await startTestProxy({
      upstreams: [
        { name: 'github', prefix: '/', url: fake.url, token_pool: true },
        { name: 'cyclists', prefix: '/bicyclists', url: fake.url, cache: { policy: 'ttl', ttl_seconds: 60 } },
      ],
      pool: { tokens: [{ name: 'bob', value: 'demo_token_bob_public' }] },
    });
  }, 30_000);
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });
  beforeEach(() => fake.reset());

  it('no Accept, */*, application/json, vnd.github+json and vnd.github.v3+json: 1 upstream request; .raw makes a second', async () => {
    const first = await get(proxy.url + readme);
    for (const accept of ['*/*', 'application/json', 'application/vnd.github+json', 'application/vnd.github.v3+json']) {
      const answer = await get(proxy.url + readme, { accept });
      expect([accept, answer.body, answer.headers['cache-status']]).toEqual([accept, first.body, expect.stringMatching(/hit/)]);
      expect(answer.headers['content-type']).toBe(first.headers['content-type']); // what GitHub sent, unchanged
    }
    expect(upstreamRequests(fake, readme)).toBe(1);
    const raw = await get(proxy.url + readme, { accept: 'application/vnd.github.raw' });
    expect([raw.headers['content-type'], raw.headers['cache-status']]).toEqual([
      'application/vnd.github.raw; charset=utf-8',
      expect.stringMatching(/fwd=miss/),
    ]);
    expect(upstreamRequests(fake, readme)).toBe(2);
  });

  it.each([
    ['application/json; charset=utf-8', true],
    ['  Application/VND.GitHub+JSON ;q=0.5 ', true],
    ['application/vnd.github+json, application/json', true],
    ['application/vnd.github.v3.html+json', false],
    ['application/vnd.github.squirrel-girl-preview+json', false],
    ['application/json; q=0', false],
    ['application/json, text/plain, */*', false],
  ])('%j shares the entry: %s', async (accept, shares) => {
    await get(proxy.url + '/users/octocat');
    const answer = await get(proxy.url + '/users/octocat', { accept });
    expect(answer.headers['cache-status']).toMatch(shares ? /hit/ : /fwd=miss/);
  });

  it('an upstream that is not GitHub keeps one entry per Accept value', async () => {
    await get(`${proxy.url}/bicyclists/helsinki`);
    expect((await get(`${proxy.url}/bicyclists/helsinki`, { accept: '*/*' })).headers['cache-status']).toMatch(/fwd=miss/);
  });
});
