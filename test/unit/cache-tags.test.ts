/**
 * The pure rules of issue 37's cache: which Accept values share an entry, which 404s are stored and
 * under which tags, the tags of a GraphQL query and its answer, of a mutation, and of a webhook
 * delivery; and the tag store's own rules (a purge drops what is filed under it; an answer fetched
 * before a purge is not kept).
 */
import { parse, type OperationDefinitionNode } from 'graphql';
import { describe, expect, it } from 'vitest';
import { acceptKeyPart, isEquivalentAccept, sharesEquivalentAccept } from '../../src/cache/rules/key.js';
import { classify, type Got } from '../../src/cache/rules/classify.js';
import { answerKeys, answerTags, graphqlTags, inputTags, MAX_TAGS, queryTags, storableData } from '../../src/cache/rules/graphql-tags.js';
import { negativeLifetime, pathTags } from '../../src/cache/rules/classify.js';
import { policyOf } from '../../src/cache/rules/policy.js';
import { keysFor, type CacheRequest } from '../../src/cache/rules/request.js';
import { isTag, normalTag } from '../../src/cache/rules/tags.js';
import { deliveryTags } from '../../src/cache/rules/webhook-tags.js';
import { createTagStore, PURGE_MARGIN_MS } from '../../src/cache/store/tags.js';
import { Cache } from '../../src/cache/store/cache.js';
import { cachePolicySchema } from '../../src/platform/config/schema.js';
import { parseConfig } from '../../src/platform/config/load.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import { testEntry } from '../helpers/entry.js';

describe('equivalent Accept values (GitHub upstreams)', () => {
  it.each([
    [undefined, true],
    ['', true],
    ['*/*', true],
    ['application/json', true],
    ['application/vnd.github+json', true],
    ['application/vnd.github.v3+json', true],
    ['Application/JSON', true],
    [' application/json ; charset="UTF-8" ; q=0.8', true],
    ['application/vnd.github+json, */*;q=0.1', true],
    [', ,', true],
    ['application/vnd.github.raw', false],
    ['application/vnd.github.v3.raw+json', false],
    ['application/vnd.github.html+json', false],
    ['application/vnd.github.diff', false],
    ['application/vnd.github.patch', false],
    ['application/vnd.github.sha', false],
    ['application/vnd.github.text-match+json', false],
    ['application/vnd.github.star+json', false],
    ['application/vnd.github.full+json', false],
    ['application/vnd.github.mercy-preview+json', false],
    ['application/json; q=0', false],
    ['application/json; charset=latin1', false],
    ['application/json; version=2', false],
    ['application/*', false],
    ['text/html, */*', false],
    [`application/json,${' '.repeat(600)}`, false],
  ])('%j selects the default JSON: %s', (accept, equivalent) => {
    expect(isEquivalentAccept(accept)).toBe(equivalent);
    expect(acceptKeyPart(accept, true)).toBe(equivalent ? undefined : accept);
    expect(acceptKeyPart(accept, false)).toBe(accept); // another API: every value is its own
  });

  it('GitHub is an upstream with the pool or GraphQL, api.github.com or Enterprise Server /api/v3', () => {
    const upstream = (url: string, more = {}) => ({ url, token_pool: false, graphql: false, ...more });
    expect(sharesEquivalentAccept(upstream('https://api.github.com'))).toBe(true);
    expect(sharesEquivalentAccept(upstream('https://ghe.example.com/api/v3'))).toBe(true);
    expect(sharesEquivalentAccept(upstream('http://127.0.0.1:9100', { token_pool: true }))).toBe(true);
    expect(sharesEquivalentAccept(upstream('https://api.example.com'))).toBe(false);
    expect(sharesEquivalentAccept(upstream('https://api.github.com.evil.example'))).toBe(false);
  });
});

function request(policy: CacheRequest['policy'], method: 'GET' | 'HEAD' = 'GET'): CacheRequest {
  const keys = keysFor(
    { upstream: 'github', pathname: '/repos/o/r', search: '', accept: undefined, apiVersion: undefined, partition: 'c:x' },
    undefined,
  );
  return {
    keys,
    upstream: 'github',
    pathname: '/repos/o/r',
    method,
    directives: {},
    header: () => undefined,
    credential: 'client',
    policy,
  };
}

function answered(status: number): Got {
  const now = Date.now();
  const fetched = {
    kind: 'response' as const,
    status,
    headers: { 'content-type': 'application/json' },
    body: Buffer.from('{"message":"Not Found"}'),
    requestTime: now,
    responseTime: now,
  };
  return { kind: 'fetched', fetched, token: undefined, fetchedBy: { kind: 'client', credential: 'id' } };
}

describe('404s, cached briefly', () => {
  const github = policyOf(cachePolicySchema.parse({}));
  it('a 404 or 410 to a GET is stored for negative_seconds (60) under the GitHub policies, never served stale', () => {
    for (const status of [404, 410]) {
      const result = classify(answered(status), undefined, request(github));
      expect(result).toMatchObject({ kind: 'entry', storeKey: expect.any(String) });
      if (result.kind !== 'entry') continue;
      expect([result.entry.lifetime, result.entry.staleIfError, result.entry.staleWhileRevalidate, result.entry.mustRevalidate]).toEqual([
        60,
        0,
        0,
        true,
      ]);
    }
  });

  it('not a HEAD, not another status, not with negative_seconds 0, not under rfc9111 or none', () => {
    expect(negativeLifetime(github, 404, 'HEAD')).toBeUndefined();
    expect(negativeLifetime(github, 403, 'GET')).toBeUndefined();
    expect(negativeLifetime(policyOf(cachePolicySchema.parse({ negative_seconds: 0 })), 404, 'GET')).toBeUndefined();
    expect(negativeLifetime(policyOf(cachePolicySchema.parse({ policy: 'rfc9111' })), 404, 'GET')).toBeUndefined();
    expect(negativeLifetime(policyOf(cachePolicySchema.parse({ policy: 'ttl', ttl_seconds: 5, negative_seconds: 7 })), 410, 'GET')).toBe(7);
    expect(classify(answered(404), undefined, request(github, 'HEAD'))).toMatchObject({ kind: 'entry', storeKey: undefined });
  });

  it("is filed under its path's repository and owner; hostile paths give no tag", () => {
    expect(pathTags('/repos/Octo/Hello/issues/9')).toEqual(['repo:octo/hello', 'owner:octo']);
    expect(pathTags('/repos/octo')).toEqual(['owner:octo']);
    expect(pathTags('/users/no-such-user')).toEqual(['owner:no-such-user']);
    expect(pathTags('/orgs/Org/teams')).toEqual(['owner:org']);
    expect(pathTags('/gists/abc')).toEqual([]);
    expect(pathTags('/repos/o%2Fx/..')).toEqual([]);
    expect(pathTags('/repos/%E0%A4%A/r')).toEqual([]);
  });
});

const operationOf = (text: string): { document: ReturnType<typeof parse>; operation: OperationDefinitionNode } => {
  const document = parse(text);
  return {
    document,
    operation: document.definitions.find((node): node is OperationDefinitionNode => node.kind === 'OperationDefinition')!,
  };
};

describe('the tags of a GraphQL query and its answer', () => {
  it("names the query's root repository, organization, user, node and nodes: literal, variable, default, aliased, in fragments", () => {
    const { document, operation } = operationOf(`query Q($o: String = "Octo", $n: String!, $ids: [ID!]!) {
      a: repository(owner: $o, name: $n) { id }
      organization(login: "Org") { login }
      ...Root
      ... on Query { repositoryOwner(login: "Someone") { login } }
      nodes(ids: $ids) { id }
      viewer { login }
    }
    fragment Root on Query { user(login: "Bob") { login } node(id: "MDQ6VXNlcjE=") { id } }`);
    expect(queryTags(document, operation, { n: 'Hello', ids: ['R_kgDOAAAA', 'not an id'] }).sort()).toEqual(
      ['owner:bob', 'owner:org', 'owner:someone', 'repo:octo/hello', 'node:MDQ6VXNlcjE=', 'node:R_kgDOAAAA'].sort(),
    );
    // Missing or hostile arguments name nothing.
    expect(queryTags(document, operation, { o: '../x', n: 'Hello' })).not.toContain('repo:../x/hello');
  });

  it('reads every id and nameWithOwner of the answer, under the aliases the query gives them', () => {
    const { document } = operationOf(
      '{ r: repository(owner: "o", name: "n") { key: id n: nameWithOwner forks(first: 2) { nodes { id } } } }',
    );
    const data = { r: { key: 'MDEwOlJlcG9zaXRvcnkx', n: 'O/N', forks: { nodes: [{ id: 'MDEwOlJlcG9zaXRvcnky' }, null] } } };
    expect(answerTags(data, answerKeys(document))!.sort()).toEqual(['node:MDEwOlJlcG9zaXRvcnkx', 'node:MDEwOlJlcG9zaXRvcnky', 'repo:o/n']);
  });

  it('an answer with more than MAX_TAGS ids is not stored (undefined)', () => {
    const { document, operation } = operationOf('{ nodes(ids: []) { id } }');
    const data = { nodes: Array.from({ length: MAX_TAGS + 1 }, (_, index) => ({ id: `MDEwOlJlcG9zaXRvcnk${index}` })) };
    expect(graphqlTags(document, operation, undefined, data)).toBeUndefined();
  });

  it('a mutation purges the ids of its input (any *Id, *Ids, id) and of its answer', () => {
    const { operation } = operationOf(`mutation($input: AddLabelsToLabelableInput!) {
      addLabelsToLabelable(input: $input) { clientMutationId }
      updateIssue(input: {id: "I_kwDOAAAA", title: "MDEwOlJlcG9zaXRvcnkx"}) { issue { id } }
    }`);
    const variables = { input: { labelableId: 'I_kwDOBBBB', labelIds: ['LA_kwDOCCCC'], clientMutationId: 'MDEwOlJlcG9zaXRvcnky' } };
    expect(inputTags(operation, variables).sort()).toEqual(['node:I_kwDOAAAA', 'node:I_kwDOBBBB', 'node:LA_kwDOCCCC']);
  });

  it('stores only a 200 JSON object with data and no errors', () => {
    const body = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
    expect(storableData(200, 'application/json; charset=utf-8', body({ data: { a: 1 } }))).toEqual({ data: { a: 1 } });
    expect(storableData(200, 'application/json', body({ data: { a: null }, errors: [{ type: 'NOT_FOUND' }] }))).toBeUndefined();
    expect(storableData(200, 'application/json', body({ data: null }))).toBeUndefined();
    expect(storableData(200, 'text/html', body({ data: {} }))).toBeUndefined();
    expect(storableData(502, 'application/json', body({ data: {} }))).toBeUndefined();
  });
});

describe('the tags of a webhook delivery', () => {
  const org = { login: 'Org', node_id: 'MDEyOk9yZ2FuaXphdGlvbjE=' };
  const repository = { full_name: 'Org/Repo', name: 'Repo', owner: { login: 'Org' }, node_id: 'MDEwOlJlcG9zaXRvcnkx' };
  const sender = { login: 'someone', node_id: 'MDQ6VXNlcjI=' };

  it("an issue: the repository, and the node ids of what it is about (not the sender's, nor the organization's)", () => {
    const tags = deliveryTags('issues', { action: 'opened', issue: { node_id: 'I_kwDOAAAA' }, repository, organization: org, sender });
    expect(tags.sort()).toEqual(['node:I_kwDOAAAA', 'node:MDEwOlJlcG9zaXRvcnkx', 'repo:org/repo']);
  });

  it('an org-wide event adds the owner; a rename or transfer the former names', () => {
    const renamed = { action: 'renamed', changes: { repository: { name: { from: 'Old' } } }, repository, organization: org, sender };
    expect(deliveryTags('repository', renamed)).toEqual(
      expect.arrayContaining(['repo:org/repo', 'repo:org/old', 'owner:org', `node:${org.node_id}`]),
    );
    const moved = { action: 'transferred', changes: { owner: { from: { user: { login: 'Former' } } } }, repository };
    expect(deliveryTags('repository', moved)).toEqual(expect.arrayContaining(['repo:former/repo', 'owner:former']));
    const joined = { action: 'member_added', membership: { user: { login: 'carol' } }, organization: org };
    expect(deliveryTags('organization', joined)).toEqual(['owner:org', `node:${org.node_id}`]);
    const installed = {
      action: 'added',
      installation: { account: { login: 'Org' } },
      repositories_added: [{ full_name: 'Org/A', node_id: 'R_kgDOAAAA' }],
    };
    expect(deliveryTags('installation_repositories', installed).sort()).toEqual(['node:R_kgDOAAAA', 'owner:org', 'repo:org/a']);
  });

  it('a hostile payload names no tag of its own making', () => {
    const tags = deliveryTags('issues', {
      repository: { full_name: '../../x', node_id: 'a b' },
      issue: { node_id: 'x'.repeat(300) },
      sender,
    });
    expect(tags).toEqual([]);
    expect(deliveryTags('issues', { repository: 'not an object', issue: [1, null, 'x'] })).toEqual([]);
  });

  it('/admin/purge takes the three kinds of tag, repository and owner in any case', () => {
    expect(['repo:Octo/Hello', 'owner:Octo', 'node:MDEwOlJlcG9zaXRvcnkx'].map((tag) => [isTag(tag), normalTag(tag)])).toEqual([
      [true, 'repo:octo/hello'],
      [true, 'owner:octo'],
      [true, 'node:MDEwOlJlcG9zaXRvcnkx'],
    ]);
    for (const bad of ['repo:x', 'repo:../x/y', 'owner:', 'node:a b', 'pool:x', 'path:/x', 'repo:a/b/c']) expect(isTag(bad)).toBe(false);
  });
});

describe('the tag store (one process)', () => {
  const tiersOf = () =>
    new Cache(
      { l1: true, maxBytes: 1 << 20, maxEntryBytes: 1 << 16, lockMs: 1000 },
      createMetrics({ defaultMetrics: false }),
      createLogger({ level: 'silent' }),
      undefined,
    );

  it('a purge drops from L1 every entry filed under one of its tags, and nothing else', async () => {
    const tiers = tiersOf();
    const tags = createTagStore(tiers, undefined, createLogger({ level: 'silent' }));
    const now = Date.now();
    for (const key of ['gql:a', 'gql:b', 'gql:c']) tiers.l1!.set(key, testEntry({ storedAt: now }), 60_000);
    expect(await tags.file('gql:a', ['repo:o/r', 'node:MDEwOlJlcG9zaXRvcnkx'], 60_000, now)).toBe(true);
    expect(await tags.file('gql:b', ['node:MDEwOlJlcG9zaXRvcnkx'], 60_000, now)).toBe(true);
    expect(await tags.file('gql:c', ['owner:o'], 60_000, now)).toBe(true);
    expect(await tags.purge(['node:MDEwOlJlcG9zaXRvcnkx'])).toBe(2);
    expect([tiers.l1!.peek('gql:a'), tiers.l1!.peek('gql:b'), tiers.l1!.peek('gql:c') !== undefined]).toEqual([undefined, undefined, true]);
    expect((await tags.filed('gql:c'))?.tags).toEqual(['owner:o']);
    expect(await tags.filed('gql:a')).toBeUndefined();
  });

  it('hostile: a tag of 100,000 characters is filed cut to 256, and a purge of the same tag still drops the entry', async () => {
    const tiers = tiersOf();
    const tags = createTagStore(tiers, undefined, createLogger({ level: 'silent' }));
    const now = Date.now();
    const long = `repo:o/${'x'.repeat(100_000)}`;
    tiers.l1!.set('gql:long', testEntry({ storedAt: now }), 60_000);
    expect(await tags.file('gql:long', [long], 60_000, now)).toBe(true);
    expect((await tags.filed('gql:long'))?.tags.map((tag) => tag.length)).toEqual([256]);
    expect(await tags.purge([long])).toBe(1);
    expect(tiers.l1!.peek('gql:long')).toBeUndefined();
  });

  it("an answer read from another replica's L2 is held under its tags: a purge drops it; one fetched before a purge is not held", async () => {
    const tiers = tiersOf();
    const tags = createTagStore(tiers, undefined, createLogger({ level: 'silent' }));
    const now = Date.now();
    tiers.l1!.set('gql:held', testEntry({ storedAt: now }), 60_000);
    expect(tags.hold('gql:held', ['repo:o/r'], now + 60_000, now)).toBe(true);
    expect(await tags.purge(['repo:o/r'])).toBe(1);
    expect(tiers.l1!.peek('gql:held')).toBeUndefined();
    expect(tags.hold('gql:late', ['repo:o/r'], now + 60_000, now - 10)).toBe(false);
  });

  it('an answer whose query went upstream before a purge of one of its tags (or within the margin after) is not kept', async () => {
    const tags = createTagStore(tiersOf(), undefined, createLogger({ level: 'silent' }));
    const before = Date.now() - 5;
    await tags.purge(['repo:o/r']);
    expect(tags.purgedSince(['owner:o', 'repo:o/r'], before)).toBe(true);
    expect(await tags.file('gql:a', ['repo:o/r'], 60_000, before)).toBe(false);
    expect(await tags.file('gql:b', ['repo:o/r'], 60_000, Date.now() + PURGE_MARGIN_MS + 1)).toBe(true);
    expect(await tags.file('gql:c', ['repo:o/other'], 60_000, before)).toBe(true);
  });
});

describe('the keys of issue 37', () => {
  const upstream = (more: Record<string, unknown>) =>
    parseConfig({ upstreams: [{ name: 'github', prefix: '/', url: 'https://api.github.com', ...more }] }).upstreams[0]!;

  it('graphql_cache_seconds is 60 once graphql is on, 0 otherwise; negative_seconds 60', () => {
    expect(upstream({ graphql: true }).graphql_cache_seconds).toBe(60);
    expect(upstream({ graphql: true, graphql_cache_seconds: 0 }).graphql_cache_seconds).toBe(0);
    expect(upstream({}).graphql_cache_seconds).toBe(0);
    expect(upstream({}).cache.negative_seconds).toBe(60);
    expect(upstream({ cache: { negative_seconds: 0 } }).cache.negative_seconds).toBe(0);
  });

  it.each([
    [{ graphql_cache_seconds: 30 }, /graphql_cache_seconds: needs graphql: true/],
    [{ graphql: true, graphql_cache_seconds: -1 }, /graphql_cache_seconds/],
    [{ graphql: true, graphql_cache_seconds: 4000 }, /graphql_cache_seconds/],
    [{ cache: { negative_seconds: -5 } }, /cache\.negative_seconds/],
    [{ cache: { negative_seconds: 1.5 } }, /cache\.negative_seconds/],
    [{ cache: { negative_seconds: '60' } }, /cache\.negative_seconds/],
  ])('refuses %j, naming the key', (more, message) => {
    expect(() => upstream(more)).toThrow(message);
  });
});
