/**
 * Scoped consumer keys (consumers.keys[].allow): a key reads inside its globs and gets a 403 JSON
 * naming it outside them, whatever spelling the path takes (dot segments, escapes, case, double
 * slashes, a query that looks like a path), and whatever the cache holds: an entry another
 * consumer warmed is never served outside the scope. Paths by repository id, search and GraphQL
 * need a rule that names them; writes through the pass-through obey the rule's methods. No refused
 * request reaches the upstream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { get } from '../helpers/http.js';
import { counterSum } from '../helpers/metrics-text.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { sendTarget } from '../helpers/raw-request.js';
import { testSecret } from '../helpers/secrets.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const POOL_TOKEN = testSecret('consumer-scopes pool token', 'scopes_pool_token_7c1e9a42');
const WIDE = testSecret('consumer-scopes key wide', 'scopes_key_wide_31d8f0');
const ACME = testSecret('consumer-scopes key acme', 'scopes_key_acme_b94e27');
const WRITER = testSecret('consumer-scopes key writer', 'scopes_key_writer_5a0c13');
const FINDER = testSecret('consumer-scopes key finder', 'scopes_key_finder_e62f8d');
const RESET = Math.floor(Date.now() / 1000) + 3600;

let upstream: ScriptedUpstream;
let proxy: TestProxy;

beforeAll(async () => {
  upstream = await startScriptedUpstream((req, res) => {
    const limits = {
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': '4990',
      'x-ratelimit-reset': String(RESET),
      'x-ratelimit-resource': 'core',
    };
    if (req.method === 'POST' && req.url === '/graphql') {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', ...limits, 'x-ratelimit-resource': 'graphql' });
      res.end(JSON.stringify({ data: { viewer: { login: 'pool' } } }));
      return;
    }
    res.writeHead(req.method === 'POST' ? 201 : 200, {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'public, max-age=60',
      etag: `"${req.url}"`,
      ...limits,
    });
    res.end(JSON.stringify({ path: req.url }));
  });
  proxy = await startTestProxy({
    upstreams: [
      { name: 'github', prefix: '/', url: upstream.url, token_pool: true, pass_through: true, graphql: true, cache: { policy: 'max-age' } },
    ],
    pool: { tokens: [{ name: 'a', value: POOL_TOKEN }], probe_at_start: false },
    consumers: {
      enabled: true,
      keys: [
        { name: 'wide', value: WIDE },
        { name: 'acme-reader', value: ACME, allow: [{ paths: ['/repos/acme/**', '/orgs/acme/repos'] }] },
        { name: 'acme-writer', value: WRITER, allow: [{ paths: ['/repos/acme/*/issues'], methods: ['GET', 'POST'] }] },
        {
          name: 'finder',
          value: FINDER,
          allow: [{ paths: ['/search/**', '/repositories/**'] }, { paths: ['/graphql'], methods: ['POST'] }],
        },
      ],
    },
  });
});

afterAll(async () => {
  await proxy?.close();
  await upstream?.close();
});

const upstreamCount = (): number => upstream.seen.length;

/** A request by `key` with its target sent as given; asserts it is refused 403 naming `consumer`, with nothing sent upstream. */
async function expectRefused(key: string, consumer: string, target: string, method = 'GET', body?: string): Promise<void> {
  const before = upstreamCount();
  const answer = await sendTarget(proxy.url, target, { 'x-etagere-key': key, 'content-type': 'application/json' }, method, body);
  expect(answer.status, `${method} ${target}`).toBe(403);
  const parsed = JSON.parse(answer.body.toString()) as { message: string; documentation_url: string };
  expect(parsed.message).toContain(`"${consumer}"`);
  expect(parsed.message).toContain('no rule');
  expect(parsed.documentation_url).toMatch(/^https:/);
  expect(upstreamCount(), `${method} ${target} reached the upstream`).toBe(before);
}

describe('a scoped consumer key', () => {
  it('reads inside its globs', async () => {
    for (const path of [
      '/repos/acme/widget',
      '/repos/acme/widget/pulls?state=open',
      '/orgs/acme/repos',
      '/REPOS/Acme/Widget/',
      '/repos/acme/widget/',
    ]) {
      const answer = await sendTarget(proxy.url, path, { 'x-etagere-key': ACME });
      expect(answer.status, path).toBe(200);
    }
  });

  it('gets a 403 JSON naming it outside them, and nothing goes upstream', async () => {
    for (const path of ['/repos/other/widget', '/orgs/acme/members', '/orgs/acme', '/user', '/rate_limit', '/repos/acmex/widget', '/repos'])
      await expectRefused(ACME, 'acme-reader', path);
  });

  it('cannot step outside by dot segments, escapes, case, double slashes or the query', async () => {
    const tricks = [
      '/repos/acme/../other/x',
      '/repos/acme/%2e%2e/other',
      '/repos/acme/%2E%2E/other/x',
      '/repos/acme%2Fother',
      '/repos/acme%2fother/x',
      '/repos/acme/.%2e/other',
      '/REPOS/OTHER/x',
      '//repos/acme/../../x',
      '/repos//acme/x',
      '/repos/acme/..;/other',
      '/repos/acme/%5c../other',
      `/repos/other/x?../../repos/acme/x`,
      '/repos/acme%2F..%2Fother/x',
    ];
    for (const target of tricks) {
      const before = upstreamCount();
      const answer = await sendTarget(proxy.url, target, { 'x-etagere-key': ACME });
      expect([400, 403], target).toContain(answer.status);
      expect(JSON.parse(answer.body.toString()), target).toHaveProperty('message');
      expect(upstreamCount(), `${target} reached the upstream`).toBe(before);
    }
    // A query that looks like a path stays a query: the path decides.
    const inside = await sendTarget(proxy.url, '/repos/acme/x?../../other', { 'x-etagere-key': ACME });
    expect(inside.status).toBe(200);
    expect(upstream.seen.at(-1)!.url).toBe('/repos/acme/x?../../other');
  });

  it("is checked on the API path under GitHub Enterprise Server's /api/v3 form too", async () => {
    expect((await sendTarget(proxy.url, '/api/v3/repos/acme/widget', { 'x-etagere-key': ACME })).status).toBe(200);
    await expectRefused(ACME, 'acme-reader', '/api/v3/repos/other/widget');
    await expectRefused(ACME, 'acme-reader', '/api/graphql', 'POST', JSON.stringify({ query: '{ viewer { login } }' }));
  });

  it('is refused a very long path outside its scope, and served one inside it', async () => {
    await expectRefused(ACME, 'acme-reader', `/repos/other/${'a/'.repeat(2000)}x`);
    const deep = await sendTarget(proxy.url, `/repos/acme/${'a/'.repeat(2000)}x`, { 'x-etagere-key': ACME });
    expect(deep.status).toBe(200);
  });

  it('never gets an entry another consumer warmed outside its scope from the cache', async () => {
    const warmed = await get(`${proxy.url}/repos/other/secret-plans`, { 'x-etagere-key': WIDE });
    expect(warmed.status).toBe(200);
    const hit = await get(`${proxy.url}/repos/other/secret-plans`, { 'x-etagere-key': WIDE });
    expect(hit.headers['cache-status']).toMatch(/hit/);
    await expectRefused(ACME, 'acme-reader', '/repos/other/secret-plans');
    // Inside its scope it shares the pool's cache partition as before.
    await get(`${proxy.url}/repos/acme/shared`, { 'x-etagere-key': WIDE });
    const before = upstreamCount();
    const shared = await get(`${proxy.url}/repos/acme/shared`, { 'x-etagere-key': ACME });
    expect(shared.status).toBe(200);
    expect(shared.headers['cache-status']).toMatch(/hit/);
    expect(upstreamCount()).toBe(before);
  });

  it('is held to its scope in Authorization too', async () => {
    const before = upstreamCount();
    const answer = await get(`${proxy.url}/repos/other/x`, { authorization: `token ${ACME}` });
    expect(answer.status).toBe(403);
    expect(upstreamCount()).toBe(before);
  });

  it('needs a rule naming /repositories, /search and /graphql explicitly', async () => {
    await expectRefused(ACME, 'acme-reader', '/repositories/123');
    await expectRefused(ACME, 'acme-reader', '/search/code?q=acme');
    await expectRefused(ACME, 'acme-reader', '/graphql', 'POST', JSON.stringify({ query: '{ viewer { login } }' }));
    expect((await get(`${proxy.url}/repositories/123`, { 'x-etagere-key': FINDER })).status).toBe(200);
    expect((await get(`${proxy.url}/search/code?q=x`, { 'x-etagere-key': FINDER })).status).toBe(200);
    const graphql = await sendTarget(
      proxy.url,
      '/graphql',
      { 'x-etagere-key': FINDER, 'content-type': 'application/json' },
      'POST',
      JSON.stringify({ query: '{ viewer { login } }' }),
    );
    expect(graphql.status).toBe(200);
    // The finder's rules name nothing else.
    await expectRefused(FINDER, 'finder', '/repos/acme/x');
  });

  it('writes through the pass-through only with a rule whose methods allow it', async () => {
    await expectRefused(ACME, 'acme-reader', '/repos/acme/widget/issues', 'POST', '{"title":"x"}');
    await expectRefused(WRITER, 'acme-writer', '/repos/acme/widget/pulls', 'POST', '{"title":"x"}');
    await expectRefused(WRITER, 'acme-writer', '/repos/acme/widget/issues', 'DELETE');
    const before = upstreamCount();
    const posted = await sendTarget(
      proxy.url,
      '/repos/acme/widget/issues',
      { 'x-etagere-key': WRITER, 'content-type': 'application/json' },
      'POST',
      '{"title":"x"}',
    );
    expect(posted.status).toBe(201);
    expect(upstreamCount()).toBe(before + 1);
    expect(upstream.seen.at(-1)!.headers['x-etagere-key']).toBeUndefined();
  });

  it('leaves a key without allow its full access', async () => {
    for (const path of ['/repos/other/x', '/repositories/1', '/search/code?q=1', '/user'])
      expect((await get(`${proxy.url}${path}`, { 'x-etagere-key': WIDE })).status, path).toBe(200);
  });

  it('counts refusals by consumer with reason scope', async () => {
    const metrics = await (await fetch(`${proxy.adminUrl}/metrics`)).text();
    expect(counterSum(metrics, 'etagere_consumer_rejections_total', { consumer: 'acme-reader', reason: 'scope' })).toBeGreaterThan(5);
    expect(counterSum(metrics, 'etagere_consumer_rejections_total', { consumer: 'acme-writer', reason: 'scope' })).toBe(2);
    expect(counterSum(metrics, 'etagere_consumer_rejections_total', { consumer: 'wide', reason: 'scope' })).toBeUndefined();
  });
});
