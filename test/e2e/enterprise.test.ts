/**
 * GitHub Enterprise Server end to end. The fake serves GHES's layout (the REST
 * API under `/api/v3`, GraphQL at `/api/graphql`); the proxy's whole configuration is the upstream
 * URL `<fake>/api/v3`, pool tokens and `graphql: true`. Through the proxy: the `/rate_limit` probe,
 * Link and body addresses on the proxy (and following them), a renamed repository's 301, route
 * labels, a pooled GraphQL query, web addresses left alone; and the same behind a route prefix
 * with `strip_prefix`. The proxy holds the only tokens the fake accepts from it and the clients
 * hold none: the fake's counters show that no request went around the proxy.
 */
import { Octokit } from '@octokit/rest';
import { request as httpRequest } from 'node:http';
import { stringUrlFields, WEB_URL_FIELD } from '../fake-upstream/helpers.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { OUTSIDE_BASE } from '../../fake-github/server.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { expectAllThroughProxy } from '../helpers/clients.js';
import { get } from '../helpers/http.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';

const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
/** Both tokens see public data only, so whichever serves a request, the answer is the same. */
const POOL_LOGINS = ['bob', 'carol'];
const TOKENS = { one: 'ghes_pool_token_one', two: 'ghes_pool_token_two' };
/** A token of the fake that is not in the pool: a client's own. */
const OWN = 'ghes_own_token_octocat';
/** A limit no default assumes: the pool knows it only from the fake's answer to its probe. */
const TOKEN_LIMIT = 4321;
const HELLO_ID = 1296269;
const VIEWER = '{ viewer { login } repository(owner: "octocat", name: "hello-world") { url } }';

type Json = Record<string, unknown>;
interface TokenRow {
  name: string;
  state: string;
  limit: number | null;
  resources: Record<string, { used: number; limit: number }>;
}

/** The `rel` targets of a Link header. */
function links(header: string | null): Record<string, string> {
  const found: Record<string, string> = {};
  for (const part of (header ?? '').split(',')) {
    const match = /<([^>]+)>;\s*rel="(\w+)"/.exec(part);
    if (match !== null) found[match[2]!] = match[1]!;
  }
  return found;
}

async function graphql(url: string, query: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ query }) });
}

async function tokenRows(proxy: TestProxy): Promise<TokenRow[]> {
  return (JSON.parse((await get(`${proxy.adminUrl}/admin/tokens`)).body) as { tokens: TokenRow[] }).tokens;
}

async function metricsOf(proxy: TestProxy): Promise<string> {
  return (await get(`${proxy.adminUrl}/metrics`)).body;
}

/** GET of a request target as it is written (no URL parsing, so no dot segment is resolved on the way): its status. */
function rawStatus(base: string, target: string): Promise<number> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path: target, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

async function rename(fake: FakeUpstream, path: string, name: string): Promise<void> {
  const res = await fetch(`${fake.url}/__fake/rename`, { method: 'POST', body: JSON.stringify({ path, name }) });
  expect(res.status).toBe(200);
}

/** The fake's counters show no API path outside its base (GHES has nothing there), `/api/v3/graphql` included. */
function expectNothingOutsideTheBase(fake: FakeUpstream): void {
  expect(fake.stats().byPath[OUTSIDE_BASE] ?? 0).toBe(0);
}

describe('GitHub Enterprise Server (/api/v3) behind a zero-config proxy', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  /** A second proxy, serving the same GHES under the prefix /ghe (strip_prefix). */
  let prefixed: TestProxy;
  let ghe: string;
  /** A third, in GHES's own layout: REST at /api/v3, GraphQL at /api/graphql (clients configured for GHES). */
  let layout: TestProxy;
  /** The fake's counters once both proxies have started. */
  let atStart: ReturnType<FakeUpstream['stats']>;

  beforeAll(async () => {
    fake = await startFakeUpstream({
      basePath: '/api/v3',
      tokenLimit: TOKEN_LIMIT,
      tokens: parseTokenSpec(`${TOKENS.one}@bob:public_repo,${TOKENS.two}@carol:public_repo,${OWN}@octocat:repo`),
    });
    const pool = {
      tokens: [
        { name: 'one', value: TOKENS.one },
        { name: 'two', value: TOKENS.two },
      ],
    };
    proxy = await startTestProxy({
      upstreams: [{ name: 'ghes', prefix: '/', url: fake.apiUrl, token_pool: true, graphql: true }],
      pool,
    });
    prefixed = await startTestProxy({
      upstreams: [{ name: 'ghes', prefix: '/ghe', strip_prefix: true, url: `${fake.apiUrl}/`, token_pool: true, graphql: true }],
      pool,
    });
    ghe = `${prefixed.url}/ghe`;
    layout = await startTestProxy({
      upstreams: [
        { name: 'ghes', prefix: '/api/v3', strip_prefix: true, url: fake.apiUrl, token_pool: true },
        { name: 'ghes-graphql', prefix: '/api', strip_prefix: true, url: fake.apiUrl, token_pool: true, graphql: true },
      ],
      pool: { ...pool, probe_at_start: false },
    });
    for (const started of [proxy, prefixed])
      await until(async () => (await tokenRows(started)).every((row) => row.limit === TOKEN_LIMIT), 10_000, 'the probe');
    atStart = fake.stats();
  });
  afterAll(async () => {
    await proxy?.close();
    await prefixed?.close();
    await layout?.close();
    await fake?.close();
  });

  describe('at the root', () => {
    beforeEach(() => fake.reset());

    it('probes GET /api/v3/rate_limit at start: the pool knows each token’s numbers before any request', async () => {
      // One probe per token and proxy, at /api/v3/rate_limit (the fake counts it below its base path).
      expect(atStart.byPath).toEqual({ '/rate_limit': 4 });
      const rows = await tokenRows(proxy);
      expect(rows.map((row) => [row.name, row.state, row.limit])).toEqual([
        ['one', 'ok', TOKEN_LIMIT],
        ['two', 'ok', TOKEN_LIMIT],
      ]);
      // Every resource the answer listed, graphql's included.
      for (const row of rows) expect(row.resources.graphql).toMatchObject({ limit: 5000, used: 0 });
      // The pool answers a consumer's /rate_limit itself, from what it learnt.
      const limits = JSON.parse((await get(`${proxy.url}/rate_limit`)).body) as { resources: { core: { limit: number } } };
      expect(limits.resources.core.limit).toBe(2 * TOKEN_LIMIT);
      expect(fake.stats().total).toBe(0);
    });

    it('a paginated list: Link and body addresses point at the proxy, and following them stays on it', async () => {
      const first = await fetch(`${proxy.url}/orgs/etagere-org/repos?per_page=30`);
      expect(first.status).toBe(200);
      const rels = links(first.headers.get('link'));
      expect(rels).toEqual({
        next: `${proxy.url}/orgs/etagere-org/repos?per_page=30&page=2`,
        last: `${proxy.url}/orgs/etagere-org/repos?per_page=30&page=3`,
      });
      const page = (await first.json()) as Json[];
      const found = stringUrlFields(page);
      expect(found.length).toBeGreaterThan(100);
      for (const [key, url] of found) {
        if (WEB_URL_FIELD.test(key)) expect(url.includes(new URL(proxy.url).host) || url.includes('/api/v3'), `${key}=${url}`).toBe(false);
        else if (url !== null) expect(url.startsWith(`${proxy.url}/`), `${key}=${url}`).toBe(true);
      }
      expect(JSON.stringify(page)).not.toContain(fake.apiUrl);
      // Following next to the end, then an address out of a body: all through the proxy.
      let next: string | undefined = rels.next;
      let count = page.length;
      while (next !== undefined) {
        const answer = await fetch(next);
        expect(answer.status).toBe(200);
        count += ((await answer.json()) as Json[]).length;
        next = links(answer.headers.get('link')).next;
      }
      expect(count).toBe(75);
      const owner = await fetch(String(page[0]!.url));
      expect(owner.status).toBe(200);
      expect(((await owner.json()) as Json).full_name).toBe(page[0]!.full_name);
      expect(fake.stats().byPath['/orgs/etagere-org/repos']).toBe(3);
      expectAllThroughProxy(fake, POOL_LOGINS);
      expectNothingOutsideTheBase(fake);
    });

    it('Octokit with the proxy as its base URL paginates through it', async () => {
      const octokit = new Octokit({ baseUrl: proxy.url, log: quiet });
      const repos = await octokit.paginate(octokit.repos.listForOrg, { org: 'etagere-org', per_page: 40 });
      expect(new Set(repos.map((repo) => repo.id)).size).toBe(75);
      expectAllThroughProxy(fake, POOL_LOGINS);
      expectNothingOutsideTheBase(fake);
    });

    it('a renamed repository’s 301 Location points at the proxy, and following it works', async () => {
      await rename(fake, '/api/v3/repos/octocat/hello-world', 'hello-ghes');
      const moved = await fetch(`${proxy.url}/repos/octocat/hello-world`, { redirect: 'manual' });
      expect(moved.status).toBe(301);
      expect(moved.headers.get('location')).toBe(`${proxy.url}/repositories/${HELLO_ID}`);
      const followed = await fetch(`${proxy.url}/repos/octocat/hello-world`);
      expect(followed.url).toBe(`${proxy.url}/repositories/${HELLO_ID}`);
      const repo = (await followed.json()) as Json;
      expect(repo.full_name).toBe('octocat/hello-ghes');
      // Web addresses are GHES's web (the server's root), left alone.
      expect(repo.html_url).toBe(`${fake.url}/octocat/hello-ghes`);
      expect(repo.url).toBe(`${proxy.url}/repos/octocat/hello-ghes`);
      expect(fake.stats().byPath[`/repositories/${HELLO_ID}`]).toBe(1);
      expectAllThroughProxy(fake, POOL_LOGINS);
      await rename(fake, '/api/v3/repos/octocat/hello-ghes', 'hello-world');
    });

    it('a pooled GraphQL query goes to /api/graphql and is accounted under graphql', async () => {
      const answer = await graphql(`${proxy.url}/graphql`, VIEWER);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('x-ratelimit-resource')).toBe('graphql');
      const body = (await answer.json()) as { data: { viewer: { login: string }; repository: { url: string } } };
      expect(POOL_LOGINS).toContain(body.data.viewer.login);
      // GraphQL's url is a web address: not the proxy's.
      expect(body.data.repository.url).toBe(`${fake.url}/octocat/hello-world`);
      // The fake answers GraphQL only at /api/graphql (it counts it as /graphql); /api/v3/graphql would be outside.
      expect(fake.stats().byPath).toEqual({ '/graphql': 1 });
      expectAllThroughProxy(fake, POOL_LOGINS);
      const spent = (await tokenRows(proxy)).map((row) => row.resources.graphql?.used ?? 0);
      expect(spent.reduce((sum, used) => sum + used, 0)).toBe(1);
      expect(await metricsOf(proxy)).toMatch(
        /etagere_requests_total\{upstream="ghes",route="\/graphql",method="POST",status="200"\} [1-9]/,
      );
    });

    it('hostile: a pooled mutation is refused and never reaches GHES; a client’s own token passes through to /api/graphql', async () => {
      const mutation = 'mutation { addStar(input: {starrableId: "x"}) { clientMutationId } }';
      const refused = await graphql(`${proxy.url}/graphql`, mutation);
      expect(refused.status).toBe(403);
      expect(Object.keys((await refused.json()) as Json).sort()).toEqual(['documentation_url', 'message']);
      expect(fake.stats().total).toBe(0);
      const own = await graphql(`${proxy.url}/graphql`, '{ viewer { login } }', { authorization: `token ${OWN}` });
      expect(((await own.json()) as { data: { viewer: { login: string } } }).data.viewer.login).toBe('octocat');
      expect(fake.stats().byCredential).toEqual({ octocat: 1 });
      expect(fake.stats().byPath).toEqual({ '/graphql': 1 });
    });

    it('labels metrics with route templates, never the raw paths under /api/v3', async () => {
      await fetch(`${proxy.url}/repos/octocat/spoon-knife`).then((res) => res.arrayBuffer());
      await fetch(`${proxy.url}/users/bob`).then((res) => res.arrayBuffer());
      const metrics = await metricsOf(proxy);
      expect(metrics).toMatch(/etagere_requests_total\{upstream="ghes",route="\/repos\/\{owner\}\/\{repo\}",method="GET",status="200"\}/);
      expect(metrics).toMatch(/etagere_upstream_requests_total\{upstream="ghes",route="\/users\/\{username\}",status="200"\}/);
      expect(metrics).not.toMatch(/route="[^"]*(api\/v3|octocat|spoon)/);
    });

    it('a client in GHES’s own layout (/api/v3/..., gh with GH_HOST) gets the same resource, its addresses under /api/v3', async () => {
      const res = await fetch(`${proxy.url}/api/v3/repos/octocat/hello-world`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).url).toBe(`${proxy.url}/api/v3/repos/octocat/hello-world`);
      expectAllThroughProxy(fake, POOL_LOGINS);
    });

    it('hostile: a client that repeats the base path gets GHES’s 404 through the pool, labelled other', async () => {
      const doubled = await fetch(`${proxy.url}/api/v3/api/v3/repos/octocat/hello-world`);
      expect(doubled.status).toBe(404);
      expect(Object.keys((await doubled.json()) as Json).sort()).toEqual(['documentation_url', 'message']);
      expect(await metricsOf(proxy)).toMatch(/etagere_requests_total\{upstream="ghes",route="other",method="GET",status="404"\}/);
      expectAllThroughProxy(fake, POOL_LOGINS);
    });
  });

  describe('under a route prefix (/ghe, strip_prefix)', () => {
    beforeEach(() => fake.reset());

    it('Link, body addresses and Location carry the prefix, and following them works', async () => {
      const first = await fetch(`${ghe}/orgs/etagere-org/repos?per_page=50`);
      expect(first.status).toBe(200);
      const next = links(first.headers.get('link')).next;
      expect(next).toBe(`${ghe}/orgs/etagere-org/repos?per_page=50&page=2`);
      const page = (await first.json()) as Json[];
      expect(page[0]!.url).toBe(`${ghe}/repos/${String(page[0]!.full_name)}`);
      expect(String(page[0]!.html_url).startsWith(`${fake.url}/etagere-org/`)).toBe(true);
      expect(((await (await fetch(next!)).json()) as Json[]).length).toBe(25);
      expect((await fetch(String(page[0]!.url))).status).toBe(200);

      await rename(fake, '/repos/octocat/linguist', 'tongues');
      const moved = await fetch(`${ghe}/repos/octocat/linguist`, { redirect: 'manual' });
      expect(moved.headers.get('location')).toMatch(new RegExp(`^${ghe.replace(/[.]/g, '\\.')}/repositories/\\d+$`));
      const octokit = new Octokit({ baseUrl: ghe, log: quiet });
      expect((await octokit.repos.get({ owner: 'octocat', repo: 'linguist' })).data.full_name).toBe('octocat/tongues');
      await rename(fake, '/repos/octocat/tongues', 'linguist');
      expectAllThroughProxy(fake, POOL_LOGINS);
      expectNothingOutsideTheBase(fake);
    });

    it('GraphQL at <prefix>/graphql reaches /api/graphql; metrics label templates below the prefix', async () => {
      const answer = await graphql(`${ghe}/graphql`, VIEWER);
      expect(answer.status).toBe(200);
      expect(POOL_LOGINS).toContain(((await answer.json()) as { data: { viewer: { login: string } } }).data.viewer.login);
      expect(fake.stats().byPath).toEqual({ '/graphql': 1 });
      await fetch(`${ghe}/repos/octocat/spoon-knife`).then((res) => res.arrayBuffer());
      const metrics = await metricsOf(prefixed);
      expect(metrics).toMatch(/etagere_requests_total\{upstream="ghes",route="\/graphql",method="POST",status="200"\}/);
      expect(metrics).toMatch(/etagere_requests_total\{upstream="ghes",route="\/repos\/\{owner\}\/\{repo\}",method="GET",status="200"\}/);
      expect(metrics).not.toMatch(/route="[^"]*(ghe|api\/v3|octocat)/);
      expectAllThroughProxy(fake, POOL_LOGINS);
    });

    it('hostile: outside the prefix there is no route; a dot segment never climbs out of it', async () => {
      const outside = await fetch(`${prefixed.url}/repos/octocat/hello-world`);
      expect(outside.status).toBe(404);
      expect(Object.keys((await outside.json()) as Json).sort()).toEqual(['documentation_url', 'message']);
      for (const target of [
        '/ghe/../api/graphql',
        '/ghe/%2e%2e/api/graphql',
        '/ghe/..%2Fapi/graphql',
        '/ghe/repos/octocat/hello-world/../../../x',
      ])
        expect(await rawStatus(prefixed.url, target), target).toBe(400);
      expect(fake.stats().total).toBe(0);
    });
  });

  describe('in GHES’s own layout (/api/v3 and /api/graphql)', () => {
    beforeEach(() => fake.reset());

    it('Octokit with baseUrl <proxy>/api/v3 paginates REST and posts GraphQL to <proxy>/api/graphql, all through the pool', async () => {
      const octokit = new Octokit({ baseUrl: `${layout.url}/api/v3`, log: quiet });
      const repos = await octokit.paginate(octokit.repos.listForOrg, { org: 'etagere-org', per_page: 50 });
      expect(repos).toHaveLength(75);
      expect(repos[0]!.url.startsWith(`${layout.url}/api/v3/repos/`)).toBe(true);
      // @octokit/graphql turns a base URL ending in /api/v3 into /api/graphql, as GHES serves it.
      const answer = await octokit.graphql<{ viewer: { login: string } }>('{ viewer { login } }');
      expect(POOL_LOGINS).toContain(answer.viewer.login);
      expect(fake.stats().byPath).toEqual({ '/orgs/etagere-org/repos': 2, '/graphql': 1 });
      expectAllThroughProxy(fake, POOL_LOGINS);
      const metrics = await metricsOf(layout);
      expect(metrics).toMatch(/etagere_requests_total\{upstream="ghes",route="\/orgs\/\{org\}\/repos",method="GET",status="200"\} 2/);
      expect(metrics).toMatch(/etagere_requests_total\{upstream="ghes-graphql",route="\/graphql",method="POST",status="200"\} 1/);
    });
  });
});
