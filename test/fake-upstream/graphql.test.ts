/**
 * The fake's GraphQL endpoint against GitHub's documented behaviour: viewer, repository,
 * organization repositories with cursors, rateLimit, addStar; point costs by GitHub's rule
 * (requests to fill each connection / 100, at least 1) from a `graphql` budget per token;
 * RATE_LIMITED answers (primary, and a scripted secondary one); and hostile input that never
 * crashes it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ALICE_PUBLIC, ALICE_REPO, auth, BOB_PUBLIC, get, post, rate, useFake, type Got } from './helpers.js';

interface GraphqlBody<Data = Record<string, unknown>> {
  data?: Data;
  errors?: Array<{ type?: string; message: string; path?: string[] }>;
}

async function graphql(url: string, token: string | undefined, body: unknown, raw = false): Promise<Got> {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token === undefined ? {} : auth(token)) },
    body: raw ? (body as string) : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: <Body>() => JSON.parse(text) as Body };
}

describe('fake upstream: POST /graphql', () => {
  const fake = useFake({});
  afterEach(() => fake.reset());

  it('answers viewer, repository and rateLimit, and spends the graphql budget', async () => {
    const query =
      '{ viewer { login databaseId } repository(owner: "octocat", name: "hello-world") { nameWithOwner databaseId isPrivate url owner { login avatarUrl } } rateLimit { cost limit remaining used resetAt } }';
    const answer = await graphql(fake.url, ALICE_REPO, { query });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-ratelimit-resource')).toBe('graphql');
    expect(rate(answer.headers)).toMatchObject({ limit: 5000, used: 1, remaining: 4999 });
    const body = answer.json<GraphqlBody>();
    expect(body.errors).toBeUndefined();
    expect(body.data).toMatchObject({
      viewer: { login: 'alice', databaseId: 100001 },
      // `url` and `avatarUrl` are web addresses, GitHub's (as REST's html_url and avatar_url)
      repository: {
        nameWithOwner: 'octocat/hello-world',
        databaseId: 1296269,
        isPrivate: false,
        url: 'https://github.com/octocat/hello-world',
        owner: { login: 'octocat', avatarUrl: 'https://avatars.githubusercontent.com/u/583231?v=4' },
      },
      rateLimit: { cost: 1, limit: 5000, remaining: 4999, used: 1 },
    });
    expect((body.data!.rateLimit as { resetAt: string }).resetAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    // REST's core budget is untouched.
    const limits = (await get(`${fake.url}/rate_limit`, auth(ALICE_REPO))).json<{ resources: Record<string, { used: number }> }>();
    expect(limits.resources.graphql!.used).toBe(1);
    expect(limits.resources.core!.used).toBe(0);
  });

  it('pages an organization with first/after cursors, and totalCount counts what the token may see', async () => {
    const page = `query($after: String) { organization(login: "etagere-org") { repositories(first: 50, after: $after) {
      totalCount nodes { name } pageInfo { hasNextPage endCursor } } } }`;
    type Repos = {
      organization: {
        repositories: { totalCount: number; nodes: Array<{ name: string }>; pageInfo: { hasNextPage: boolean; endCursor: string } };
      };
    };
    const first = (await graphql(fake.url, ALICE_REPO, { query: page })).json<GraphqlBody<Repos>>().data!.organization.repositories;
    expect(first.totalCount).toBe(77); // 75 public + 2 private: alice is a member with the repo scope
    expect(first.nodes).toHaveLength(50);
    expect(first.pageInfo.hasNextPage).toBe(true);
    const second = (await graphql(fake.url, ALICE_REPO, { query: page, variables: { after: first.pageInfo.endCursor } })).json<
      GraphqlBody<Repos>
    >().data!.organization.repositories;
    expect(second.nodes).toHaveLength(27);
    expect(second.pageInfo.hasNextPage).toBe(false);
    const names = new Set([...first.nodes, ...second.nodes].map((node) => node.name));
    expect(names.size).toBe(77);
    // Without the repo scope, the private ones do not exist.
    const outsider = (await graphql(fake.url, BOB_PUBLIC, { query: page })).json<GraphqlBody<Repos>>().data!.organization.repositories;
    expect(outsider.totalCount).toBe(75);
  });

  it('prices a call by GitHub rule: requests to fill each connection / 100, rounded, at least 1', async () => {
    // 1 request for the organization's repositories + 100 for each repository's owner's repositories = 101 → 1 point.
    const nested = `{ organization(login: "etagere-org") { repositories(first: 100) { nodes { owner { repositories(first: 100) { totalCount } } } } }
      rateLimit { cost nodeCount } }`;
    const cheap = await graphql(fake.url, ALICE_REPO, { query: nested });
    expect(cheap.json<GraphqlBody<{ rateLimit: { cost: number; nodeCount: number } }>>().data!.rateLimit).toEqual({
      cost: 1,
      nodeCount: 10100,
    });
    // Three levels: 1 + 50 + 50*50 = 2551 requests → 26 points.
    const deep = `{ organization(login: "etagere-org") { repositories(first: 50) { nodes { owner { repositories(first: 50) {
      nodes { owner { repositories(first: 50) { totalCount } } } } } } } } rateLimit { cost } }`;
    const dear = await graphql(fake.url, ALICE_REPO, { query: deep });
    expect(dear.json<GraphqlBody<{ rateLimit: { cost: number } }>>().data!.rateLimit.cost).toBe(26);
    expect(rate(dear.headers)).toMatchObject({ used: 27, remaining: 5000 - 27 });
  });

  it('answers GitHub-typed errors: NOT_FOUND, pagination, validation, parse, bad JSON', async () => {
    const missing = (
      await graphql(fake.url, ALICE_REPO, { query: '{ repository(owner: "octocat", name: "nope") { name } }' })
    ).json<GraphqlBody>();
    expect(missing.data).toEqual({ repository: null });
    expect(missing.errors![0]).toMatchObject({ type: 'NOT_FOUND', path: ['repository'] });
    expect(missing.errors![0]!.message).toBe("Could not resolve to a Repository with the name 'octocat/nope'.");
    // A private repository is NOT_FOUND to a token that may not see it.
    const hidden = (
      await graphql(fake.url, ALICE_PUBLIC, { query: '{ repository(owner: "alice", name: "secret-project") { name } }' })
    ).json<GraphqlBody>();
    expect(hidden.errors![0]!.type).toBe('NOT_FOUND');
    const unbounded = (
      await graphql(fake.url, ALICE_REPO, { query: '{ organization(login: "etagere-org") { repositories { totalCount } } }' })
    ).json<GraphqlBody>();
    expect(unbounded).toEqual({ errors: [expect.objectContaining({ type: 'MISSING_PAGINATION_BOUNDARIES' })] });
    const excessive = (
      await graphql(fake.url, ALICE_REPO, { query: '{ organization(login: "etagere-org") { repositories(first: 101) { totalCount } } }' })
    ).json<GraphqlBody>();
    expect(excessive.errors![0]!.type).toBe('EXCESSIVE_PAGINATION');
    const unknownField = await graphql(fake.url, ALICE_REPO, { query: '{ viewer { password } }' });
    expect(unknownField.status).toBe(200);
    expect(unknownField.json<GraphqlBody>().errors![0]!.message).toContain('password');
    const syntax = await graphql(fake.url, ALICE_REPO, { query: '{ viewer { login }' });
    expect(syntax.json<GraphqlBody>().errors![0]!.message).toMatch(/Syntax Error/);
    const noQuery = await graphql(fake.url, ALICE_REPO, { variables: {} });
    expect(noQuery.json<GraphqlBody>().errors![0]!.message).toBe('A query attribute must be specified and must be a string.');
    const notJson = await graphql(fake.url, ALICE_REPO, '{"query": ', true);
    expect(notJson.status).toBe(400);
    expect(notJson.json<{ message: string }>().message).toBe('Problems parsing JSON');
    const twoOps = await graphql(fake.url, ALICE_REPO, { query: 'query A { viewer { login } } query B { viewer { name } }' });
    expect(twoOps.json<GraphqlBody>().errors![0]!.message).toBe('Must provide operation name if query contains multiple operations.');
    const chosen = await graphql(fake.url, ALICE_REPO, {
      query: 'query A { viewer { login } } query B { viewer { name } }',
      operationName: 'A',
    });
    expect(chosen.json<GraphqlBody>().data).toEqual({ viewer: { login: 'alice' } });
  });

  it('runs addStar: the repository gains a star, in GraphQL and in REST', async () => {
    const id = (
      await graphql(fake.url, ALICE_REPO, { query: '{ repository(owner: "octocat", name: "hello-world") { id stargazerCount } }' })
    ).json<GraphqlBody<{ repository: { id: string; stargazerCount: number } }>>().data!.repository;
    const starred = await graphql(fake.url, ALICE_REPO, {
      query:
        'mutation($id: ID!) { addStar(input: {starrableId: $id, clientMutationId: "m1"}) { clientMutationId starrable { stargazerCount viewerHasStarred } } }',
      variables: { id: id.id },
    });
    expect(starred.json<GraphqlBody>().data).toEqual({
      addStar: { clientMutationId: 'm1', starrable: { stargazerCount: id.stargazerCount + 1, viewerHasStarred: true } },
    });
    const rest = (await get(`${fake.url}/repos/octocat/hello-world`)).json<{ stargazers_count: number }>();
    expect(rest.stargazers_count).toBe(id.stargazerCount + 1);
    expect(fake.stats().byPath['/graphql']).toBe(2);
  });

  it('answers RATE_LIMITED with a 200 once the points are spent, and spends nothing more', async () => {
    await post(`${fake.url}/__fake/config`, { graphqlLimit: 2 });
    expect((await graphql(fake.url, ALICE_REPO, { query: '{ viewer { login } }' })).status).toBe(200);
    expect((await graphql(fake.url, ALICE_REPO, { query: '{ viewer { login } }' })).status).toBe(200);
    const limited = await graphql(fake.url, ALICE_REPO, { query: '{ viewer { login } }' });
    expect(limited.status).toBe(200);
    expect(limited.json()).toEqual({ errors: [{ type: 'RATE_LIMITED', message: 'API rate limit exceeded for user ID 100001.' }] });
    expect(rate(limited.headers)).toMatchObject({ limit: 2, used: 2, remaining: 0 });
    expect(limited.headers.get('x-ratelimit-resource')).toBe('graphql');
    // Another token, and REST, go on.
    expect((await graphql(fake.url, BOB_PUBLIC, { query: '{ viewer { login } }' })).json<GraphqlBody>().data).toEqual({
      viewer: { login: 'bob' },
    });
    expect((await get(`${fake.url}/users/octocat`, auth(ALICE_REPO))).status).toBe(200);
    // A call dearer than what is left is refused whole.
    await post(`${fake.url}/__fake/config`, { graphqlLimit: 10 });
    const deep = `{ organization(login: "etagere-org") { repositories(first: 50) { nodes { owner { repositories(first: 50) { totalCount
      nodes { owner { repositories(first: 50) { totalCount } } } } } } } } }`;
    const tooDear = await graphql(fake.url, ALICE_REPO, { query: deep });
    expect(tooDear.json<GraphqlBody>().errors![0]!.type).toBe('RATE_LIMITED');
    expect(rate(tooDear.headers).used).toBe(0);
  });

  it('scripts secondary limits: a 200 RATE_LIMITED (GraphQL only) or a 403', async () => {
    await post(`${fake.url}/__fake/secondary`, { count: 1, status: 200, retryAfter: 30, token: 'alice' });
    // REST calls and other tokens do not consume a status-200 rule.
    expect((await get(`${fake.url}/users/octocat`, auth(ALICE_REPO))).status).toBe(200);
    expect((await graphql(fake.url, BOB_PUBLIC, { query: '{ viewer { login } }' })).status).toBe(200);
    const limited = await graphql(fake.url, ALICE_REPO, { query: '{ viewer { login } }' });
    expect(limited.status).toBe(200);
    expect(limited.headers.get('retry-after')).toBe('30');
    const body = limited.json<GraphqlBody>();
    expect(body.errors![0]!.type).toBe('RATE_LIMITED');
    expect(body.errors![0]!.message).toMatch(/secondary rate limit/);
    expect((await graphql(fake.url, ALICE_REPO, { query: '{ viewer { login } }' })).status).toBe(200);
    await post(`${fake.url}/__fake/secondary`, { count: 1, status: 403, retryAfter: null });
    const forbidden = await graphql(fake.url, ALICE_REPO, { query: '{ viewer { login } }' });
    expect(forbidden.status).toBe(403);
    expect(forbidden.json<{ message: string }>().message).toMatch(/secondary rate limit/);
    expect((await post(`${fake.url}/__fake/secondary`, { count: 1, status: 500 })).status).toBe(400);
  });

  it("needs credentials: 401 with GitHub's message", async () => {
    const anonymous = await graphql(fake.url, undefined, { query: '{ viewer { login } }' });
    expect(anonymous.status).toBe(401);
    expect(anonymous.json<{ message: string }>().message).toBe('This endpoint requires you to be authenticated.');
  });

  it('survives hostile documents: huge, deep, many tokens, bad variables', async () => {
    const deep = `{ viewer { ${'repositories(first: 1) { nodes { owner { '.repeat(2000)}login${' } } }'.repeat(2000)} } }`;
    const tooDeep = await graphql(fake.url, ALICE_REPO, { query: deep });
    expect(tooDeep.status).toBe(200);
    expect(tooDeep.json<GraphqlBody>().errors![0]!.message).toBe('Query is nested deeper than 100 levels.');
    const manyTokens = await graphql(fake.url, ALICE_REPO, { query: `{ viewer { ${'login '.repeat(25_000)} } }` });
    expect(manyTokens.json<GraphqlBody>().errors![0]!.message).toMatch(/20000 tokens/);
    const big = await graphql(fake.url, ALICE_REPO, { query: `{ viewer { login } } # ${'x'.repeat(1024 * 1024)}` });
    expect(big.status).toBe(413);
    const badVariables = await graphql(fake.url, ALICE_REPO, {
      query: 'query($n: Int!) { viewer { repositories(first: $n) { totalCount } } }',
      variables: { n: 'many' },
    });
    expect(badVariables.status).toBe(200);
    expect(badVariables.json<GraphqlBody>().errors).toBeDefined();
    const subscription = await graphql(fake.url, ALICE_REPO, { query: 'subscription { viewer { login } }' });
    expect(subscription.json<GraphqlBody>().errors).toBeDefined();
    // Still answering.
    expect((await graphql(fake.url, ALICE_REPO, { query: '{ viewer { login } }' })).json<GraphqlBody>().data).toEqual({
      viewer: { login: 'alice' },
    });
  });
});
