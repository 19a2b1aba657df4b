/**
 * GraphQL through the pool, against the fake's GraphQL endpoint: a pooled query
 * is answered on a pool token and accounted in the `graphql` resource; a mutation from a pooled
 * consumer is refused and never reaches the fake, while a client's own token runs one; RATE_LIMITED
 * answers pause or spend the token and the call goes to another; identical queries may be served
 * from a short-lived cache; hostile bodies are refused before the upstream; on Enterprise Server
 * the call goes to /api/graphql.
 */
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { get, post, type Answer } from '../helpers/http.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { counterSum } from '../helpers/metrics-text.js';

const TOKENS = { a: 'gql_pool_token_aaaa1111', b: 'gql_pool_token_bbbb2222' };
/** A client's own token, shaped like GitHub's: with consumer keys on, only such a credential goes upstream as the client's. */
const OWN = 'ghp_gqlOwnTokenOctocat3333aaaabbbbcccc11';
const CONSUMER_KEY = 'gql_consumer_key_7c1e55';
const FAKE_TOKENS = parseTokenSpec(`${TOKENS.a}@alice:public_repo,${TOKENS.b}@bob:public_repo,${OWN}@octocat:repo`);
const LOGIN_OF: Record<string, string> = { a: 'alice', b: 'bob' };
const SECRETS = [...Object.values(TOKENS), OWN, CONSUMER_KEY];

const VIEWER = '{ viewer { login } }';
/** 1 + 50 + 2500 requests to fill: 26 points on GitHub's rule. */
const DEAR = `{ organization(login: "etagere-org") { repositories(first: 50) { nodes { owner { repositories(first: 50) {
  nodes { owner { repositories(first: 50) { totalCount } } } } } } } } }`;
const STAR = 'mutation($id: ID!) { addStar(input: {starrableId: $id}) { starrable { stargazerCount } } }';

interface TokenRow {
  name: string;
  state: string;
  paused_until: string | null;
  resources: Record<string, { limit: number; remaining: number; used: number }>;
}

/** POSTs a GraphQL body (an object as JSON, a string as it is) to `url`. */
async function graphql(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

const json = <Body = { data?: Record<string, unknown>; errors?: Array<{ type?: string; message: string }>; message?: string }>(
  answer: Answer,
): Body => JSON.parse(answer.body) as Body;

async function adminTokens(proxy: TestProxy): Promise<TokenRow[]> {
  return (JSON.parse((await get(`${proxy.adminUrl}/admin/tokens`)).body) as { tokens: TokenRow[] }).tokens;
}

const proxies: TestProxy[] = [];
const fakes: FakeUpstream[] = [];

async function setUp(
  upstream: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
  fakeOptions: Parameters<typeof startFakeUpstream>[0] = {},
): Promise<{ fake: FakeUpstream; proxy: TestProxy }> {
  const fake = await startFakeUpstream({ tokens: FAKE_TOKENS, ...fakeOptions });
  fakes.push(fake);
  const proxy = await startTestProxy({
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, graphql: true, ...upstream }],
    pool: {
      tokens: [
        { name: 'a', value: TOKENS.a },
        { name: 'b', value: TOKENS.b },
      ],
    },
    ...extra,
  });
  proxies.push(proxy);
  return { fake, proxy };
}

afterEach(async () => {
  for (const proxy of proxies.splice(0)) {
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    const admin = (await get(`${proxy.adminUrl}/admin/tokens`)).body;
    await proxy.close();
    for (const secret of SECRETS) {
      expect(proxy.logText()).not.toContain(secret);
      expect(metrics).not.toContain(secret);
      expect(admin).not.toContain(secret);
    }
  }
  for (const fake of fakes.splice(0)) await fake.close();
});

describe('GraphQL through the pool', () => {
  it("spends one secondary-limit point of the token's GraphQL budget per query, none of REST's", async () => {
    const { proxy } = await setUp();
    expect((await graphql(`${proxy.url}/graphql`, { query: VIEWER })).status).toBe(200);
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(counterSum(metrics, 'etagere_pool_points_total', { kind: 'graphql' })).toBe(1);
    expect(counterSum(metrics, 'etagere_pool_points_total', { kind: 'rest' }) ?? 0).toBe(0);
  });

  it('answers a pooled query on a pool token and accounts its points under graphql', async () => {
    const { fake, proxy } = await setUp();
    const first = await graphql(`${proxy.url}/graphql`, { query: VIEWER });
    expect(first.status).toBe(200);
    const token = String(first.headers['x-etagere-token']);
    expect(json(first).data).toEqual({ viewer: { login: LOGIN_OF[token] } });
    // The pool's numbers in the graphql resource: two tokens of 5000 points, one spent.
    expect(first.headers['x-ratelimit-resource']).toBe('graphql');
    expect([first.headers['x-ratelimit-limit'], first.headers['x-ratelimit-remaining'], first.headers['x-ratelimit-used']]).toEqual([
      '10000',
      '9999',
      '1',
    ]);
    const dear = await graphql(`${proxy.url}/graphql`, { query: DEAR });
    expect(dear.status).toBe(200);
    expect(dear.headers['x-ratelimit-remaining']).toBe(String(10000 - 27));
    const rows = await adminTokens(proxy);
    expect(rows.reduce((sum, row) => sum + row.resources.graphql!.used, 0)).toBe(27);
    expect(rows.every((row) => row.resources.core!.used === 0)).toBe(true); // REST's budget untouched
    expect(fake.stats().byPath['/graphql']).toBe(2);
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(metrics).toMatch(/etagere_requests_total\{upstream="github",route="\/graphql",method="POST",status="200"\} 2/);
  });

  it('refuses a mutation from a pooled consumer (403, never upstream); a client with its own token runs it', async () => {
    const { fake, proxy } = await setUp();
    const repo = await graphql(`${proxy.url}/graphql`, {
      query: '{ repository(owner: "octocat", name: "hello-world") { id stargazerCount } }',
    });
    const { id, stargazerCount } = json<{ data: { repository: { id: string; stargazerCount: number } } }>(repo).data.repository;
    const before = fake.stats().byPath['/graphql'];

    const refused = await graphql(`${proxy.url}/graphql`, { query: STAR, variables: { id } });
    expect(refused.status).toBe(403);
    expect(json(refused)).toEqual({ message: expect.stringMatching(/mutations are not allowed/), documentation_url: expect.any(String) });
    // Hidden in another operation of the document, asked for by name or not: refused as well.
    const hidden = await graphql(`${proxy.url}/graphql`, {
      query: `query Q { viewer { login } } ${STAR.replace('mutation', 'mutation M')}`,
      operationName: 'Q',
    });
    expect(hidden.status).toBe(403);
    expect(fake.stats().byPath['/graphql']).toBe(before);
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(metrics).toContain('etagere_graphql_refused_total{upstream="github",reason="mutation"} 2');

    // The client's own token: passed through unchanged (pass_through is off for REST).
    const own = await graphql(`${proxy.url}/graphql`, { query: STAR, variables: { id } }, { authorization: `token ${OWN}` });
    expect(own.status).toBe(200);
    expect(json(own).data).toEqual({ addStar: { starrable: { stargazerCount: stargazerCount + 1 } } });
    expect(own.headers['x-ratelimit-limit']).toBe('5000'); // its own numbers, not the pool's
    expect(own.headers['x-etagere-token']).toBeUndefined();
    expect(fake.stats().byCredential.octocat).toBe(1);
    expect((await request(`${proxy.url}/repos/octocat/hello-world`, { method: 'POST', body: '{}' })).statusCode).toBe(405);
  });

  it.each([200, 403])('pauses a token on a %i secondary limit; the call and the next ones go to the other token', async (status) => {
    const { fake, proxy } = await setUp();
    await post(`${fake.url}/__fake/secondary`, { count: 1, status, retryAfter: 30 });
    const answer = await graphql(`${proxy.url}/graphql`, { query: VIEWER });
    expect(answer.status).toBe(200);
    const served = String(answer.headers['x-etagere-token']);
    expect(json(answer).data).toEqual({ viewer: { login: LOGIN_OF[served] } });
    expect(fake.stats().byPath['/graphql']).toBe(2); // the limited try, then the other token
    const rows = await adminTokens(proxy);
    const paused = rows.find((row) => row.state === 'paused');
    expect(paused?.name).toBeDefined();
    expect(paused!.name).not.toBe(served);
    const pausedFor = (Date.parse(paused!.paused_until!) - Date.now()) / 1000;
    expect(pausedFor).toBeGreaterThan(25);
    expect(pausedFor).toBeLessThanOrEqual(30);
    for (let i = 0; i < 4; i++) expect((await graphql(`${proxy.url}/graphql`, { query: VIEWER })).headers['x-etagere-token']).toBe(served);
  });

  it('spends a token whose points are gone (200 RATE_LIMITED, remaining 0) in graphql only, and retries on the other', async () => {
    const { fake, proxy } = await setUp({}, {}, { graphqlLimit: 3 });
    // Token a's points are spent elsewhere, behind the pool's back.
    for (let i = 0; i < 3; i++) await graphql(`${fake.url}/graphql`, { query: VIEWER }, { authorization: `token ${TOKENS.a}` });
    const answer = await graphql(`${proxy.url}/graphql`, { query: VIEWER });
    expect(answer.status).toBe(200);
    expect(answer.headers['x-etagere-token']).toBe('b');
    const rows = await adminTokens(proxy);
    const tokenA = rows.find((row) => row.name === 'a')!;
    expect(tokenA.resources.graphql!.remaining).toBe(0);
    expect(tokenA.state).toBe('ok'); // REST goes on with it
    const rest = await get(`${proxy.url}/users/octocat?via=a`);
    expect(rest.status).toBe(200);
  });

  it('serves identical queries from the cache for graphql_cache_seconds, never across credentials, never with errors', async () => {
    const { fake, proxy } = await setUp({ graphql_cache_seconds: 60 });
    const first = await graphql(`${proxy.url}/graphql`, {
      query: 'query($o: String!) { organization(login: $o) { login } }',
      variables: { o: 'etagere-org' },
    });
    expect(first.headers['cache-status']).toMatch(/fwd=miss; fwd-status=200; ttl=60; stored/);
    // The same query, spelt differently: one upstream call.
    const again = await graphql(`${proxy.url}/graphql`, {
      query: 'query ($o: String!) {\n  organization(login: $o) { login } # same\n}',
      variables: { o: 'etagere-org' },
    });
    expect(again.status).toBe(200);
    expect(again.body).toBe(first.body);
    expect(again.headers['cache-status']).toMatch(/^etagere; hit; ttl=\d+/);
    expect(again.headers['x-ratelimit-resource']).toBe('graphql');
    expect(fake.stats().byPath['/graphql']).toBe(1);
    // Other variables: another call. An answer with errors: never kept.
    await graphql(`${proxy.url}/graphql`, { query: 'query($o: String!) { organization(login: $o) { login } }', variables: { o: 'nope' } });
    const missing = await graphql(`${proxy.url}/graphql`, {
      query: 'query($o: String!) { organization(login: $o) { login } }',
      variables: { o: 'nope' },
    });
    expect(json(missing).errors![0]!.type).toBe('NOT_FOUND');
    expect(fake.stats().byPath['/graphql']).toBe(3);
    // A client's own credential never gets the pool's cached answer: it has a partition of its own.
    const own = await graphql(
      `${proxy.url}/graphql`,
      { query: 'query($o: String!) { organization(login: $o) { login } }', variables: { o: 'etagere-org' } },
      { authorization: `token ${OWN}` },
    );
    expect(own.headers['cache-status']).toMatch(/fwd=miss; fwd-status=200/);
    expect(fake.stats().byPath['/graphql']).toBe(4);
  });

  it('refuses hostile calls before the upstream: oversized, not JSON, ambiguous, too deep, too many tokens; allows introspection', async () => {
    const { fake, proxy } = await setUp();
    const url = `${proxy.url}/graphql`;
    const oversized = await graphql(url, { query: `{ viewer { login } } # ${'x'.repeat(300 * 1024)}` });
    expect(oversized.status).toBe(413);
    expect(json(oversized).message).toMatch(/Payload Too Large/);
    const notJson = await graphql(url, 'query { viewer { login } }');
    expect([notJson.status, json(notJson).message]).toEqual([400, expect.stringMatching(/Problems parsing JSON/)]);
    const ambiguous = await graphql(url, { query: 'query A { viewer { login } } query B { viewer { name } }' });
    expect([ambiguous.status, json(ambiguous).message]).toEqual([400, expect.stringMatching(/operationName/)]);
    const unknownName = await graphql(url, { query: 'query A { viewer { login } }', operationName: 'B' });
    expect(unknownName.status).toBe(400);
    const deep = await graphql(url, { query: `{ ${'viewer { '.repeat(3000)}login${' }'.repeat(3000)} }` });
    expect([deep.status, json(deep).message]).toEqual([400, expect.stringMatching(/nests deeper than 100/)]);
    const wide = await graphql(url, { query: `{ viewer { ${'login '.repeat(25_000)} } }` });
    expect([wide.status, json(wide).message]).toEqual([400, expect.stringMatching(/more than 20000 tokens/)]);
    const broken = await graphql(url, { query: '{ viewer { login }' });
    expect([broken.status, json(broken).message]).toEqual([400, expect.stringMatching(/does not parse/)]);
    expect(fake.stats().byPath['/graphql']).toBeUndefined();
    // Every refusal is GitHub-shaped JSON, and the proxy goes on answering.
    for (const answer of [oversized, notJson, ambiguous, unknownName, deep, wide, broken])
      expect(Object.keys(json(answer)).sort()).toEqual(['documentation_url', 'message']);
    // Introspection reads GitHub's public schema: a query like any other.
    const schema = await graphql(url, { query: '{ __schema { queryType { name } } }' });
    expect(json(schema).data).toEqual({ __schema: { queryType: { name: 'Query' } } });
    expect(fake.stats().byPath['/graphql']).toBe(1);
  });

  it('with consumer keys, needs a key for the pool; a client with its own token needs none', async () => {
    const { proxy } = await setUp({}, { consumers: { enabled: true, keys: [{ name: 'web', value: CONSUMER_KEY }] } });
    const anonymous = await graphql(`${proxy.url}/graphql`, { query: VIEWER });
    expect(anonymous.status).toBe(401);
    const keyed = await graphql(`${proxy.url}/graphql`, { query: VIEWER }, { 'x-etagere-key': CONSUMER_KEY });
    expect(keyed.status).toBe(200);
    const own = await graphql(`${proxy.url}/graphql`, { query: VIEWER }, { authorization: `token ${OWN}` });
    expect(json(own).data).toEqual({ viewer: { login: 'octocat' } });
    // Only the keyed call used the pool: it is the consumer's one request.
    const metrics = (await get(`${proxy.adminUrl}/metrics`)).body;
    expect(counterSum(metrics, 'etagere_consumer_requests_total', { consumer: 'web' })).toBe(1);
  });

  it('sends an Enterprise Server upstream (REST base /api/v3) its calls at /api/graphql', async () => {
    const fake = await startFakeUpstream({ tokens: FAKE_TOKENS });
    fakes.push(fake);
    const proxy = await startTestProxy({
      upstreams: [{ name: 'ghe', prefix: '/', url: `${fake.url}/api/v3`, token_pool: true, graphql: true }],
      pool: { tokens: [{ name: 'a', value: TOKENS.a }], probe_at_start: false },
    });
    proxies.push(proxy);
    await graphql(`${proxy.url}/graphql`, { query: VIEWER });
    await graphql(`${proxy.url}/graphql`, { query: VIEWER }, { authorization: `token ${OWN}` });
    // The fake serves GitHub.com's paths only: that it saw /api/graphql twice is what this test is about.
    expect(fake.stats().byPath['/api/graphql']).toBe(2);
    expect(fake.stats().byPath['/api/v3/graphql']).toBeUndefined();
  });
});
