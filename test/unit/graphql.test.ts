/**
 * The pure GraphQL rules of the proxy (src/paths/graphql/): which calls a pooled consumer may make, how
 * big a document is parsed, the cache key, what a RATE_LIMITED answer means, and where the
 * endpoint is on GitHub.com and on Enterprise Server.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/platform/config/load.js';
import { canonicalJson, graphqlCacheKey, type GraphqlKeyInput } from '../../src/paths/graphql/cache-key.js';
import { graphqlEndpoint, graphqlRequestPath } from '../../src/http/route.js';
import { documentTooBig, MAX_NESTING, MAX_TOKENS } from '../../src/paths/graphql/limits.js';
import { pooledQuery, type PooledQuery, type Refusal } from '../../src/paths/graphql/operation.js';
import { isRateLimited, tokenStatus } from '../../src/pool/rules/graphql-rate-limit.js';
import { storableData } from '../../src/cache/rules/graphql-tags.js';

const cacheableAnswer = (status: number, type: string, answer: Buffer): boolean => storableData(status, type, answer) !== undefined;

const call = (body: unknown): PooledQuery | Refusal => pooledQuery(typeof body === 'string' ? body : JSON.stringify(body));

function refusal(body: unknown): Refusal {
  const result = call(body);
  if (result.kind !== 'refused') throw new Error(`expected a refusal, got a query`);
  return result;
}

describe('graphql: what a pooled consumer may run', () => {
  it('lets queries through, with their variables and operation name', () => {
    const query = call({ query: 'query Q($n: Int) { viewer { login } }', variables: { n: 1 }, operationName: 'Q' });
    expect(query).toMatchObject({ kind: 'query', variables: { n: 1 }, operationName: 'Q' });
    expect(call({ query: '{ viewer { login } }' })).toMatchObject({ kind: 'query', variables: undefined, operationName: undefined });
    // Introspection is a query: allowed (it reads GitHub's public schema).
    expect(call({ query: '{ __schema { types { name } } }' }).kind).toBe('query');
  });

  it('refuses mutations and subscriptions with 403, also beside the query asked for', () => {
    expect(refusal({ query: 'mutation { addStar(input: {starrableId: "x"}) { clientMutationId } }' })).toMatchObject({
      status: 403,
      reason: 'mutation',
    });
    expect(refusal({ query: 'subscription { x }' })).toMatchObject({ status: 403, reason: 'subscription' });
    expect(refusal({ query: 'query A { viewer { login } } mutation B { addStar(input: {}) { x } }', operationName: 'B' }).reason).toBe(
      'mutation',
    );
    // The upstream picks the operation to run: a document that holds a mutation is refused whatever is asked.
    expect(refusal({ query: 'query A { viewer { login } } mutation B { addStar(input: {}) { x } }', operationName: 'A' }).reason).toBe(
      'mutation',
    );
    expect(refusal({ query: 'mutation { a }' }).message).toMatch(/own credential/);
  });

  it('refuses with 400 what is not a call: bad JSON, no query, parse errors, unknown or missing operation', () => {
    for (const body of ['not json', '[1]', 'null', '"query"', '{"query": 1}', '{"query": "  "}', '{"query": "{a}", "variables": [1]}'])
      expect(refusal(body)).toMatchObject({ status: 400, reason: 'bad_json' });
    expect(refusal({ query: '{a}', operationName: 7 }).reason).toBe('bad_json');
    expect(refusal({ query: '{ viewer { login }' })).toMatchObject({ status: 400, reason: 'parse' });
    expect(refusal({ query: 'query A { a } query B { b }' })).toMatchObject({ status: 400, reason: 'operation' });
    expect(refusal({ query: 'query A { a }', operationName: 'B' })).toMatchObject({ status: 400, reason: 'operation' });
    expect(refusal({ query: 'fragment F on User { login }' })).toMatchObject({ status: 400, reason: 'operation' });
  });

  it('bounds what is parsed: tokens and nesting, measured without recursion', () => {
    const deep = `{ ${'a { '.repeat(5_000)}b${' }'.repeat(5_000)} }`;
    expect(documentTooBig(deep)).toMatch(/nests deeper than/);
    expect(refusal({ query: deep })).toMatchObject({ status: 400, reason: 'limits' });
    expect(refusal({ query: `{ ${'[[[['.repeat(50)} }` }).reason).toBe('limits');
    expect(documentTooBig(`{ ${'a '.repeat(MAX_TOKENS)} }`)).toMatch(/tokens/);
    expect(documentTooBig(`{ ${'a { '.repeat(MAX_NESTING - 1)}b${' }'.repeat(MAX_NESTING - 1)} }`)).toBeUndefined();
    // Variables are JSON sent on again: their nesting is bounded too (JSON.stringify recurses).
    const nested = `{"query": "{ a }", "variables": ${'{"a":'.repeat(40_000)}1${'}'.repeat(40_000)}}`;
    expect(refusal(nested)).toMatchObject({ status: 400, reason: 'limits', message: expect.stringMatching(/variables nest deeper/) });
    expect(call({ query: '{ a }', variables: { a: [[[{ b: 1 }]]] } }).kind).toBe('query');
    // Comments and strings do not count as nesting.
    expect(documentTooBig(`{ a(x: "${'{'.repeat(500)}") # ${'{'.repeat(500)}\n }`)).toBeUndefined();
  });
});

describe('graphql: cache key', () => {
  const parsed = (query: string): PooledQuery => call({ query }) as PooledQuery;
  const base = (query: string, extra: Partial<GraphqlKeyInput> = {}): string =>
    graphqlCacheKey({
      upstream: 'github',
      partition: 'pool',
      document: parsed(query).document,
      variables: undefined,
      operationName: undefined,
      selecting: [undefined, undefined, undefined],
      ...extra,
    });

  it('is the same for the same query however it is spaced or commented', () => {
    expect(base('{ viewer { login } }')).toBe(base('query {\n  viewer {\n    login # me\n  }\n}'));
    expect(base('{ viewer { login } }')).toMatch(/^gql:[\w-]{43}$/);
  });

  it('differs by document, variables (in any key order: the same), operation, partition, upstream and selecting headers', () => {
    const one = base('{ viewer { login } }');
    expect(base('{ viewer { name } }')).not.toBe(one);
    expect(base('{ viewer { login } }', { variables: { a: 1, b: { c: 2, d: 3 } } })).toBe(
      base('{ viewer { login } }', { variables: { b: { d: 3, c: 2 }, a: 1 } }),
    );
    expect(base('{ viewer { login } }', { variables: { a: 1 } })).not.toBe(base('{ viewer { login } }', { variables: { a: 2 } }));
    expect(base('{ viewer { login } }', { operationName: 'A' })).not.toBe(one);
    expect(base('{ viewer { login } }', { partition: 'c:abc' })).not.toBe(one);
    expect(base('{ viewer { login } }', { upstream: 'ghe' })).not.toBe(one);
    expect(base('{ viewer { login } }', { selecting: ['application/vnd.github+json', undefined, undefined] })).not.toBe(one);
    // Parts cannot run into each other.
    expect(base('{ viewer { login } }', { upstream: 'a', partition: 'bc' })).not.toBe(
      base('{ viewer { login } }', { upstream: 'ab', partition: 'c' }),
    );
  });

  it('canonical JSON sorts keys at every level and keeps arrays in order', () => {
    expect(canonicalJson({ b: [2, { y: 1, x: 0 }], a: null })).toBe('{"a":null,"b":[2,{"x":0,"y":1}]}');
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
  });
});

describe('graphql: RATE_LIMITED answers and what is cached', () => {
  const body = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));

  it('reads a 200 RATE_LIMITED as a 429 for the token when it is a secondary limit or the points are spent', () => {
    const spent = (name: string): string | undefined => (name === 'x-ratelimit-remaining' ? '0' : undefined);
    const left = (name: string): string | undefined => (name === 'x-ratelimit-remaining' ? '40' : undefined);
    const primary = body({ errors: [{ type: 'RATE_LIMITED', message: 'API rate limit exceeded for user ID 1.' }] });
    const secondary = body({ errors: [{ type: 'RATE_LIMITED', message: 'You have exceeded a secondary rate limit.' }] });
    expect(isRateLimited(primary)).toBe(true);
    expect(tokenStatus(200, primary, spent)).toBe(429);
    expect(tokenStatus(200, primary, () => undefined)).toBe(429);
    expect(tokenStatus(200, secondary, left)).toBe(429);
    expect(tokenStatus(200, body({ errors: [{ type: 'RATE_LIMIT', code: 'graphql_rate_limit', message: 'x' }] }), spent)).toBe(429);
    // A call dearer than the points left says nothing against the token.
    expect(tokenStatus(200, primary, left)).toBe(200);
    expect(tokenStatus(403, primary, spent)).toBe(403);
    expect(tokenStatus(200, body({ data: { viewer: { login: 'RATE_LIMITED' } } }), spent)).toBe(200);
    expect(tokenStatus(200, body({ errors: [{ type: 'NOT_FOUND', message: 'RATE_LIMITED' }] }), spent)).toBe(200);
    expect(tokenStatus(200, Buffer.from('RATE_LIMITED {'), spent)).toBe(200);
  });

  it('caches only 200 JSON answers with data and without errors', () => {
    const json = 'application/json; charset=utf-8';
    expect(cacheableAnswer(200, json, body({ data: { viewer: { login: 'a' } } }))).toBe(true);
    expect(cacheableAnswer(200, json, body({ data: { repository: null }, errors: [{ type: 'NOT_FOUND' }] }))).toBe(false);
    expect(cacheableAnswer(200, json, body({ errors: [{ message: 'x' }] }))).toBe(false);
    expect(cacheableAnswer(200, json, body({ data: null }))).toBe(false);
    expect(cacheableAnswer(502, json, body({ data: {} }))).toBe(false);
    expect(cacheableAnswer(200, 'text/html', body({ data: {} }))).toBe(false);
    expect(cacheableAnswer(200, json, Buffer.from('{"data": '))).toBe(false);
  });
});

describe('graphql: endpoint', () => {
  it('is /graphql on GitHub.com and /api/graphql under Enterprise Server /api/v3', () => {
    expect(graphqlEndpoint('/')).toBe('/graphql');
    expect(graphqlEndpoint('/api/v3')).toBe('/api/graphql');
    expect(graphqlEndpoint('/api/v3/')).toBe('/api/graphql');
    expect(graphqlEndpoint('/ghe')).toBe('/ghe/graphql');
    expect(graphqlRequestPath('/api/v3')).toBe('/api/v3/graphql');
    expect(graphqlRequestPath('/')).toBe('/graphql');
  });
});

describe('graphql: configuration', () => {
  const upstream = (extra: Record<string, unknown>) => ({
    upstreams: [{ name: 'github', prefix: '/', url: 'https://api.github.com', ...extra }],
  });

  it('is off by default, and graphql_cache_seconds needs graphql: true', () => {
    expect(parseConfig(upstream({})).upstreams[0]).toMatchObject({ graphql: false, graphql_cache_seconds: 0 });
    expect(parseConfig(upstream({ graphql: true, graphql_cache_seconds: 30 })).upstreams[0]).toMatchObject({
      graphql: true,
      graphql_cache_seconds: 30,
    });
    expect(() => parseConfig(upstream({ graphql_cache_seconds: 30 }))).toThrow(
      /upstreams\[0\]\.graphql_cache_seconds: needs graphql: true/,
    );
    expect(() => parseConfig(upstream({ graphql: true, graphql_cache_seconds: -1 }))).toThrow(/upstreams\[0\]\.graphql_cache_seconds/);
    expect(() => parseConfig(upstream({ graphql: 'yes' }))).toThrow(/upstreams\[0\]\.graphql/);
  });
});
