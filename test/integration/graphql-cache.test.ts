/**
 * GraphQL answers in the shared cache, two replicas sharing Redis in front of the fake: a pooled
 * query is answered once for every replica (L2, and one upstream POST for identical concurrent
 * misses across them); a client's own token has a partition of its own; answers with errors or
 * over the entry cap are never stored; each answer is filed under the tags of its query and its
 * contents, and a signed delivery to one replica, a mutation or /admin/purge drops it on both.
 */
import { Readable } from 'node:stream';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { runCli } from '../helpers/cli.js';
import { get, type Answer } from '../helpers/http.js';
import { counterSum } from '../helpers/metrics-text.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { testSecret } from '../helpers/secrets.js';
import { deliver } from '../helpers/webhooks.js';

const SECRET = testSecret('webhook secret of the GraphQL cache test', 'whsec-graphql-cache-0123456789');
const POOL = 'gqlc_pool_token_alice_5f1e';
const OWN = { octocat: 'gqlc_own_token_octocat_77aa', bob: 'gqlc_own_token_bob_3c9d' };
const FAKE_TOKENS = parseTokenSpec(`${POOL}@alice:public_repo,${OWN.octocat}@octocat:repo,${OWN.bob}@bob:public_repo`);

const REPO = 'query($o: String!, $n: String!) { repository(owner: $o, name: $n) { id nameWithOwner stargazerCount } }';
const ORG = '{ organization(login: "etagere-org") { login repositories(first: 2) { nodes { name } } } }';
const STAR = 'mutation($id: ID!) { addStar(input: {starrableId: $id}) { starrable { stargazerCount } } }';

type Body = { data?: Record<string, { id?: string; stargazerCount?: number } | null>; errors?: Array<{ type?: string }> };

async function graphql(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer & { json: Body }> {
  const res = await request(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body: text, json: JSON.parse(text) as Body };
}

const repoQuery = (name: string): { query: string; variables: Record<string, string> } => ({
  query: REPO,
  variables: { o: 'etagere-org', n: name },
});
const keyOf = (answer: Answer): string => /key="(gql:[^"]+)"/.exec(String(answer.headers['cache-status']))![1]!;

async function inspect(proxy: TestProxy, key: string): Promise<{ entries: Array<{ tags: string[]; tier: string; partition: string }> }> {
  const res = await request(`${proxy.adminUrl}/admin/cache?graphql=${encodeURIComponent(key)}`);
  return (await res.body.json()) as { entries: Array<{ tags: string[]; tier: string; partition: string }> };
}

/**
 * Resolves once `proxy` holds nothing under `key`: a purge on another replica reaches it on the
 * Redis bus, at once, within a second at most.
 */
async function heardPurge(proxy: TestProxy, key: string): Promise<void> {
  await until(async () => (await inspect(proxy, key)).entries.length === 0, 1_000, 'the purge on the other replica');
}

/** Resolves once `proxy`, which never read `key`, sees it filed under its tags in Redis (after its write there). */
async function filedInRedis(proxy: TestProxy, key: string): Promise<void> {
  await until(async () => ((await inspect(proxy, key)).entries[0]?.tags.length ?? 0) > 0, 2_000, 'the tags in Redis');
}

describe('GraphQL answers in the shared cache (two replicas, one Redis)', () => {
  let redis: TestRedis;
  let fake: FakeUpstream;
  let first: TestProxy;
  let second: TestProxy;
  const posts = (): number => fake.stats().byPath['/graphql'] ?? 0;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeUpstream({ tokens: FAKE_TOKENS });
    const config = {
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, graphql: true }],
      pool: { tokens: [{ name: 'alice', value: POOL }] },
      cache: { max_entry_bytes: 16 * 1024 },
      redis: { url: redis.url },
      webhooks: { secret: SECRET },
    };
    first = await startTestProxy(config);
    second = await startTestProxy(config);
  }, 60_000);
  afterAll(async () => {
    await first?.close();
    await second?.close();
    await fake?.close();
    await redis?.stop();
  });
  beforeEach(() => fake.reset());

  it('answers a pooled query once for both replicas (60 s by default), naming its key in Cache-Status', async () => {
    const miss = await graphql(first.url, repoQuery('repo-010'));
    expect(miss.headers['cache-status']).toMatch(/^etagere; fwd=miss; fwd-status=200; ttl=60; stored; key="gql:/);
    const hit = await graphql(first.url, repoQuery('repo-010'));
    expect(hit.headers['cache-status']).toMatch(/^etagere; hit; ttl=\d+; key="gql:/);
    expect([hit.headers.age, hit.headers['x-ratelimit-resource'], hit.headers['x-etagere-token']]).toEqual(['0', 'graphql', 'alice']);
    // The other replica reads it from Redis.
    const other = await graphql(second.url, repoQuery('repo-010'));
    expect(other.body).toBe(miss.body);
    expect(other.headers['cache-status']).toMatch(/hit/);
    expect(posts()).toBe(1);
    const metrics = (await get(`${first.adminUrl}/metrics`)).body;
    expect(counterSum(metrics, 'etagere_cache_requests_total', { route: '/graphql', operation: 'anonymous', result: 'hit' })).toBe(1);
  });

  it('200 concurrent identical pooled queries split across the replicas make one upstream POST', async () => {
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, index) => graphql(index % 2 === 0 ? first.url : second.url, repoQuery('repo-011'))),
    );
    expect(new Set(answers.map((answer) => answer.body)).size).toBe(1);
    expect(answers.every((answer) => answer.status === 200)).toBe(true);
    expect(posts()).toBe(1);
  });

  it("files an answer under its query's repository and owner and every id and nameWithOwner it shows", async () => {
    const repo = await graphql(first.url, repoQuery('repo-012'));
    const { id } = repo.json.data!.repository!;
    expect((await inspect(first, keyOf(repo))).entries[0]).toMatchObject({
      tier: 'L1',
      partition: 'pool',
      tags: expect.arrayContaining(['repo:etagere-org/repo-012', `node:${id}`]),
    });
    const aliased = await graphql(first.url, {
      query: '{ r: repository(owner: "Octocat", name: "Hello-World") { key: id n: nameWithOwner } }',
    });
    // The other replica never read it: Redis holds it, and its tags (filed once the entry is written there).
    let held: { tags: string[]; tier: string } | undefined;
    await until(
      async () => ((held = (await inspect(second, keyOf(aliased))).entries[0])?.tags.length ?? 0) > 0,
      2_000,
      'the tags in Redis',
    );
    expect(held!.tier).toBe('L2');
    expect(held!.tags).toEqual(expect.arrayContaining(['repo:octocat/hello-world', expect.stringMatching(/^node:/)]));
    const org = await graphql(first.url, { query: ORG });
    expect((await inspect(first, keyOf(org))).entries[0]!.tags).toEqual(['owner:etagere-org']);
  });

  it('a client with its own token gets a partition of its own: its repeats are hits, nobody else sees them', async () => {
    const own = { authorization: `token ${OWN.octocat}` };
    const viewer = { query: '{ viewer { login } }' };
    const mine = await graphql(first.url, viewer, own);
    expect(mine.json.data).toEqual({ viewer: { login: 'octocat' } });
    expect(mine.headers['cache-status']).toMatch(/fwd=miss; fwd-status=200; ttl=60; stored/);
    expect(mine.headers['x-ratelimit-resource']).toBe('graphql'); // its own numbers, from GitHub
    const again = await graphql(second.url, viewer, own);
    expect([again.headers['cache-status'], again.json.data]).toEqual([expect.stringMatching(/hit/), { viewer: { login: 'octocat' } }]);
    expect((await inspect(first, keyOf(mine))).entries[0]!.partition).toBe('client');
    // Another token, and the pool: their own answers.
    const bob = await graphql(first.url, viewer, { authorization: `token ${OWN.bob}` });
    const pooled = await graphql(first.url, viewer);
    expect([bob.json.data, pooled.json.data]).toEqual([{ viewer: { login: 'bob' } }, { viewer: { login: 'alice' } }]);
    expect(posts()).toBe(3);
  });

  it('never stores an answer with errors, nor one over cache.max_entry_bytes', async () => {
    const missing = repoQuery('no-such-repo');
    for (const proxy of [first, second, first]) {
      const answer = await graphql(proxy.url, missing);
      expect(answer.json.errors![0]!.type).toBe('NOT_FOUND');
      expect(answer.headers['cache-status']).toMatch(/fwd=miss; fwd-status=200; key=/);
    }
    // 75 repositories with their descriptions: over the 16 KiB cap, passed on as it comes.
    const fields = 'description url homepageUrl createdAt updatedAt pushedAt nameWithOwner';
    const big = { query: `{ organization(login: "etagere-org") { repositories(first: 75) { nodes { ${fields} } } } }` };
    const large = await graphql(first.url, big);
    expect([large.status, large.body.length > 16 * 1024]).toEqual([200, true]);
    const again = await graphql(first.url, big);
    expect(again.headers['cache-status']).not.toMatch(/hit/);
    expect(posts()).toBe(5);
  });

  it('a signed delivery to one replica purges by repository on both', async () => {
    await graphql(first.url, repoQuery('repo-013'));
    await graphql(second.url, repoQuery('repo-013')); // promoted into the second's L1
    const payload = {
      action: 'opened',
      repository: { full_name: 'etagere-org/repo-013', owner: { login: 'etagere-org' } },
      issue: { number: 1 },
    };
    const sent = await deliver(first.url, SECRET, 'issues', payload);
    expect(JSON.parse(sent.body)).toMatchObject({ tags: ['repo:etagere-org/repo-013'], purged: 1 });
    expect((await graphql(first.url, repoQuery('repo-013'))).headers['cache-status']).not.toMatch(/hit/);
    // The other replica hears of it on the Redis bus: at once, within a second at most.
    const purgedThere = async (): Promise<boolean> =>
      !/hit/.test(String((await graphql(second.url, repoQuery('repo-013'))).headers['cache-status']));
    await until(purgedThere, 1_000, 'the purge on the other replica');
  });

  it('purges by owner on an org-wide event, and by the node_id of every object a delivery carries', async () => {
    const org = await graphql(first.url, { query: ORG });
    const repo = await graphql(first.url, repoQuery('repo-014'));
    const { id } = repo.json.data!.repository!;
    const created = { action: 'created', repository: { full_name: 'etagere-org/brand-new', owner: { login: 'etagere-org' } } };
    await deliver(second.url, SECRET, 'repository', created);
    await heardPurge(first, keyOf(org));
    expect((await graphql(first.url, { query: ORG })).headers['cache-status']).not.toMatch(/hit/);
    expect((await graphql(first.url, repoQuery('repo-014'))).headers['cache-status']).toMatch(/hit/);
    // A star names the repository by id only here (no full_name): its node id purges it.
    await deliver(second.url, SECRET, 'star', { action: 'created', starred_at: null, repository: { node_id: id, id: 8000014 } });
    await heardPurge(first, keyOf(repo));
    expect((await graphql(first.url, repoQuery('repo-014'))).headers['cache-status']).not.toMatch(/hit/);
    // An event no path table names (GraphQL-only data, such as discussions) still purges its tags.
    // (An answer fetched within 100 ms of a purge of its tags is not kept: until one is.)
    await until(
      async () => /hit/.test(String((await graphql(first.url, repoQuery('repo-014'))).headers['cache-status'])),
      2_000,
      'stored again',
    );
    await filedInRedis(second, keyOf(repo));
    const discussion = { action: 'created', discussion: { node_id: 'D_kwDOAAAA' }, repository: { full_name: 'etagere-org/repo-014' } };
    const sent = await deliver(second.url, SECRET, 'discussion', discussion);
    expect([sent.status, JSON.parse(sent.body)]).toEqual([
      202,
      expect.objectContaining({ tags: ['repo:etagere-org/repo-014', 'node:D_kwDOAAAA'], purged: 1 }),
    ]);
    await heardPurge(first, keyOf(repo));
    expect((await graphql(first.url, repoQuery('repo-014'))).headers['cache-status']).not.toMatch(/hit/);
    expect(org.status).toBe(200);
  });

  it('a mutation with a client token purges the answers filed under the ids of its input and answer', async () => {
    const before = await graphql(first.url, repoQuery('repo-015'));
    const { id, stargazerCount } = before.json.data!.repository!;
    // Held by the second replica too (from L2, once the first has written it there).
    const heldThere = async (): Promise<boolean> =>
      /hit/.test(String((await graphql(second.url, repoQuery('repo-015'))).headers['cache-status']));
    await until(heldThere, 2_000, 'the answer on the second replica');
    const starred = await graphql(second.url, { query: STAR, variables: { id } }, { authorization: `token ${OWN.octocat}` });
    expect(starred.json.data).toEqual({ addStar: { starrable: { stargazerCount: stargazerCount! + 1 } } });
    // Purged before the answer went out: the next read there shows the star, and within a moment on the other replica.
    const after = await graphql(second.url, repoQuery('repo-015'));
    expect(after.json.data!.repository!.stargazerCount).toBe(stargazerCount! + 1);
    const stars = async (): Promise<number | undefined> =>
      (await graphql(first.url, repoQuery('repo-015'))).json.data!.repository!.stargazerCount;
    await until(async () => (await stars()) === stargazerCount! + 1, 1_000, 'the star on the other replica');
    const metrics = (await get(`${second.adminUrl}/metrics`)).body;
    expect(counterSum(metrics, 'etagere_cache_tag_purges_total', { source: 'mutation' })).toBeGreaterThanOrEqual(1);
  });

  it("a client's body the proxy does not read as a query goes as it is: past 256 KiB unread, not JSON, a subscription", async () => {
    const own = { authorization: `token ${OWN.octocat}`, 'content-type': 'application/json' };
    const padded = JSON.stringify({ query: `{ viewer { login } } # ${'x'.repeat(300 * 1024)}` });
    const sized = await request(`${first.url}/graphql`, { method: 'POST', headers: own, body: padded });
    expect([sized.statusCode, await sized.body.json()]).toEqual([200, { data: { viewer: { login: 'octocat' } } }]);
    // Chunked, no Content-Length: what was read, then the rest.
    const chunks = async function* (): AsyncGenerator<Buffer> {
      for (let at = 0; at < padded.length; at += 64 * 1024) yield Buffer.from(padded.slice(at, at + 64 * 1024));
    };
    const chunked = await request(`${first.url}/graphql`, { method: 'POST', headers: own, body: Readable.from(chunks()) });
    expect([chunked.statusCode, await chunked.body.json()]).toEqual([200, { data: { viewer: { login: 'octocat' } } }]);
    const notJson = await request(`${first.url}/graphql`, { method: 'POST', headers: own, body: 'query { viewer { login } }' });
    expect([notJson.statusCode, ((await notJson.body.json()) as { message: string }).message]).toEqual([400, 'Problems parsing JSON']);
    const subscription = await graphql(first.url, { query: 'subscription { viewer { login } }' }, own);
    expect(subscription.json.errors).toBeDefined();
    expect(posts()).toBe(4); // every one of them upstream, none stored
  });

  it('POST /admin/purge takes a tag (in the body or as ?tag=) and refuses anything else', async () => {
    const stored = await graphql(first.url, repoQuery('repo-016'));
    await filedInRedis(second, keyOf(stored));
    const res = await request(`${second.adminUrl}/admin/purge?tag=repo:Etagere-Org/repo-016`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    });
    expect([res.statusCode, await res.body.json()]).toEqual([
      200,
      { tag: 'repo:etagere-org/repo-016', purged: 1, marked: 0, replicas: 'every replica (Redis)' },
    ]);
    await heardPurge(first, keyOf(stored));
    expect((await graphql(first.url, repoQuery('repo-016'))).headers['cache-status']).not.toMatch(/hit/);
    for (const body of [{ tag: 'repo:../x' }, { tag: 'pool:x' }, { tag: 'repo:a/b', path: '/x' }, { tag: 7 }]) {
      const refused = await request(`${first.adminUrl}/admin/purge`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(refused.statusCode).toBe(400);
      expect(((await refused.body.json()) as { message: string }).message).toMatch(/tag/);
    }
    const unknown = await request(`${first.adminUrl}/admin/cache?graphql=gql:nope`);
    expect(unknown.statusCode).toBe(400);
  });

  it('etagere cache inspect --graphql KEY prints the answer and its tags; etagere purge --tag drops it', { timeout: 60_000 }, async () => {
    const answer = await graphql(first.url, repoQuery('repo-017'));
    const inspected = runCli(['cache', 'inspect', '--graphql', keyOf(answer), '--admin', first.adminUrl]);
    expect((await inspected.exited).code).toBe(0);
    const lines = inspected.stdout().split('\n');
    expect(lines[0]).toMatch(/^UPSTREAM +OPERATION +PARTITION +TIER +STATUS +AGE +TTL +SIZE +FETCHED BY/);
    expect(lines[1]).toMatch(/^github +anonymous +pool +L1 +200 /);
    expect(inspected.stdout()).toContain('tags:\n  repo:etagere-org/repo-017\n');
    await filedInRedis(second, keyOf(answer));
    const purged = runCli(['purge', '--tag', 'repo:etagere-org/repo-017', '--admin', second.adminUrl]);
    expect((await purged.exited).code).toBe(0);
    expect(purged.stdout()).toBe('dropped 1 entry filed under repo:etagere-org/repo-017; purge sent to every replica (Redis)\n');
    await heardPurge(first, keyOf(answer));
    const gone = runCli(['cache', 'inspect', '--graphql', keyOf(answer), '--admin', first.adminUrl]);
    expect((await gone.exited).code).toBe(0);
    expect(gone.stdout()).toBe(`no GraphQL answer under ${keyOf(answer)}\n`);
    const both = runCli(['cache', 'inspect', '/x', '--graphql', keyOf(answer), '--admin', first.adminUrl]);
    expect((await both.exited).code).toBe(2);
  });
});
