/**
 * In process: rate-limit resources (classification, one budget per
 * resource in the local and the IPC pool, the headers and GET /rate_limit consumers see), and the
 * confirmation of 401s (at most one probe per token per minute, shared by concurrent callers).
 */
import { describe, expect, it } from 'vitest';
import { CONFIRM_INTERVAL_MS, confirmationOf, createConfirmer } from '../../src/pool/members/confirm.js';
import { createIpcTokenPool, servePool } from '../../src/pool/backends/ipc-pool.js';
import { createTokenPool } from '../../src/pool/backends/local-pool.js';
import { createPoolHeaders, poolRateLimitBody } from '../../src/pool/rules/report.js';
import { rateLimitsFromBody, unauthorizedKind, RESOURCES, resourceNamed, resourceOf } from '../../src/pool/rules/rate-limit.js';
import { RESOURCES as FAKE_RESOURCES } from '../../fake-github/quota.js';
import type { Acquired, Confirmation, LocalTokenPool } from '../../src/pool/rules/types.js';
import { until } from '../helpers/proxy.js';
import { channelPair } from '../helpers/ipc-channel.js';

const NOW = 1_800_000_000_000;
const NOW_S = NOW / 1000;

const headersOf =
  (numbers: { limit: number; remaining: number; reset: number; resource?: string }, extra: Record<string, string> = {}) =>
  (name: string): string | undefined =>
    ({
      'x-ratelimit-limit': String(numbers.limit),
      'x-ratelimit-remaining': String(numbers.remaining),
      'x-ratelimit-reset': String(numbers.reset),
      'x-ratelimit-resource': numbers.resource ?? 'core',
      ...extra,
    })[name];

function leaseOf(acquired: Acquired) {
  if (acquired.kind !== 'lease') throw new Error(`expected a lease, got ${JSON.stringify(acquired)}`);
  return acquired.lease;
}

/** Two tokens that know core (5000) and search (2 each), on a clock the test moves. */
function pool(clock = { now: NOW }): LocalTokenPool {
  const created = createTokenPool({
    tokens: [
      { name: 'a', value: 'va' },
      { name: 'b', value: 'vb' },
    ],
    equivalent: true,
    perTokenConcurrency: 4,
    maxConcurrency: 10,
    queueTimeoutMs: 0,
    maxQueue: 10,
    now: () => clock.now,
  });
  for (const name of created.names) {
    created.learn(name, 200, [
      { limit: 5000, remaining: 5000, reset: NOW_S + 3600, resource: 'core' },
      { limit: 2, remaining: 2, reset: NOW_S + 60, resource: 'search' },
    ]);
  }
  return created;
}

describe('rate-limit resources: classification', () => {
  it.each([
    ['/search/code?q=x', '/', 'code_search'],
    ['/search/code/extra', '/', 'code_search'],
    ['/search/codes?q=x', '/', 'search'],
    ['/search/repositories?q=x', '/', 'search'],
    ['/search/issues', '/', 'search'],
    ['/search', '/', 'search'],
    ['/graphql', '/', 'graphql'],
    ['/graphql?x=1', '/', 'graphql'],
    ['/repos/o/r', '/', 'core'],
    ['/rate_limit', '/', 'core'],
    // hostile or odd paths are core: never a resource by accident
    ['/searching', '/', 'core'],
    ['/graphqlx', '/', 'core'],
    ['/repos/search/code', '/', 'core'],
    ['/SEARCH/code', '/', 'core'],
    ['', '/', 'core'],
    ['?/search/code', '/', 'core'],
    // below an Enterprise-style base path
    ['/api/v3/search/code', '/api/v3', 'code_search'],
    ['/api/v3/search/users?q=a', '/api/v3/', 'search'],
    ['/api/v3/repos/o/r', '/api/v3', 'core'],
    ['/search/code', '/api/v3', 'code_search'],
    // Enterprise Server's GraphQL endpoint is /api/graphql, outside the REST base /api/v3
    ['/api/graphql', '/api/v3', 'graphql'],
    ['/api/graphql?x=1', '/api/v3/', 'graphql'],
    ['/api/v3/graphql', '/api/v3', 'graphql'],
    ['/api/graphqlx', '/api/v3', 'core'],
    ['/api/graphql/x', '/api/v3', 'core'],
    ['/ghe/graphql', '/ghe', 'graphql'],
  ])('%s under %s is %s', (path, base, want) => {
    expect(resourceOf(path, base)).toBe(want);
  });

  it('accepts only the names GitHub has, from the upstream', () => {
    expect(resourceNamed(' Search ')).toBe('search');
    expect(resourceNamed('code_scanning_upload')).toBe('code_scanning_upload');
    for (const hostile of ['', 'evil', 'core\r\nx', '__proto__', 'constructor', 'x'.repeat(10_000)])
      expect(resourceNamed(hostile)).toBeUndefined();
  });

  // Each product keeps its own list (the fake GitHub imports nothing of the proxy): this keeps them equal.
  it("knows every resource the fake GitHub's GET /rate_limit lists, in GitHub's order, and no other", () => {
    expect([...RESOURCES]).toEqual([...FAKE_RESOURCES]);
  });

  it('reads every resource of GET /rate_limit, and nothing hostile', () => {
    const body = JSON.stringify({
      resources: {
        core: { limit: 5000, remaining: 4000, reset: NOW_S, used: 1000 },
        search: { limit: 30, remaining: 31, reset: NOW_S },
        graphql: { limit: -5, remaining: 1, reset: NOW_S },
        evil: { limit: 1, remaining: 1, reset: 1 },
        __proto__: { limit: 1, remaining: 1, reset: 1 },
        audit_log: { limit: '1750', remaining: 1, reset: 1 },
      },
    });
    expect(rateLimitsFromBody(body)).toEqual([
      { limit: 5000, remaining: 4000, reset: NOW_S, resource: 'core' },
      { limit: 30, remaining: 30, reset: NOW_S, resource: 'search' },
    ]);
    expect(rateLimitsFromBody('{"rate":{"limit":60,"remaining":59,"reset":1}}')).toEqual([
      { limit: 60, remaining: 59, reset: 1, resource: 'core' },
    ]);
    for (const hostile of ['', 'null', '[]', '"x"', '{"resources":null}', '{"resources":[1,2]}', '{'.repeat(5000)]) {
      expect(rateLimitsFromBody(hostile)).toEqual([]);
    }
  });
});

describe('rate-limit resources: one budget per resource in the pool', () => {
  it('an exhausted search budget (403, remaining 0, resource search) never blocks core', async () => {
    const clock = { now: NOW };
    const tokens = pool(clock);
    const search = leaseOf(await tokens.acquire({ resource: 'search' }));
    expect(search.resource).toBe('search');
    const limited = headersOf({ limit: 2, remaining: 0, reset: NOW_S + 60, resource: 'search' });
    expect(search.settle(403, limited, '{"message":"API rate limit exceeded"}')).toEqual({ kind: 'exhausted', reset: NOW_S + 60 });
    const other = leaseOf(await tokens.acquire({ resource: 'search' }));
    expect(other.name).not.toBe(search.name);
    other.settle(403, limited, '{"message":"API rate limit exceeded"}');
    // Search is spent for a minute (its own reset), core is whole.
    expect(await tokens.acquire({ resource: 'search' })).toEqual({ kind: 'unavailable', reason: 'exhausted', retryAfterSeconds: 61 });
    const core = leaseOf(await tokens.acquire());
    expect(core.resource).toBe('core');
    core.cancel();
    expect(tokens.snapshot().map((row) => row.state)).toEqual(['ok', 'ok']);
    expect(tokens.snapshot()[0]!.resources.search).toEqual({ limit: 2, remaining: 0, used: 2, reset: NOW_S + 60 });
    expect(tokens.rateLimit('search')).toMatchObject({ limit: 4, remaining: 0 });
    expect(tokens.rateLimit()).toMatchObject({ limit: 10_000, remaining: 10_000 });
    clock.now = (NOW_S + 61) * 1000;
    expect(leaseOf(await tokens.acquire({ resource: 'search' })).resource).toBe('search');
  });

  it('a core request whose answer names search spends search (the answer says which budget)', async () => {
    const tokens = pool();
    const lease = leaseOf(await tokens.acquire());
    lease.settle(
      403,
      headersOf({ limit: 2, remaining: 0, reset: NOW_S + 60, resource: 'search' }),
      '{"message":"API rate limit exceeded"}',
    );
    expect(tokens.rateLimit('search').remaining).toBe(2);
    expect(tokens.snapshot().find((row) => row.name === lease.name)!.resources.search!.remaining).toBe(0);
    expect(tokens.snapshot().find((row) => row.name === lease.name)!.remaining).toBe(5000);
  });

  it("a secondary limit pauses the token in every resource (it is the credential's)", async () => {
    const tokens = pool();
    const lease = leaseOf(await tokens.acquire({ resource: 'search' }));
    lease.settle(403, headersOf({ limit: 2, remaining: 1, reset: NOW_S + 60, resource: 'search' }, { 'retry-after': '30' }), undefined);
    for (let i = 0; i < 3; i++) {
      const core = leaseOf(await tokens.acquire());
      expect(core.name).not.toBe(lease.name);
      core.cancel();
    }
  });

  it('hostile: an answer naming a made-up resource changes no budget and adds no row', async () => {
    const tokens = pool();
    for (const name of ['evil', '__proto__', 'core ; x', 'x'.repeat(500)]) {
      leaseOf(await tokens.acquire()).settle(200, headersOf({ limit: 1, remaining: 0, reset: NOW_S + 9, resource: name }), undefined);
    }
    for (const row of tokens.snapshot()) expect(Object.keys(row.resources).sort()).toEqual(['core', 'search']);
    expect(tokens.rateLimit()).toMatchObject({ limit: 10_000, remaining: 10_000 });
  });

  it('headers and GET /rate_limit: each request sees its resource, /rate_limit sums every one', async () => {
    const tokens = pool();
    const headers = createPoolHeaders(tokens);
    expect(headers.resource).toBe('core');
    expect(headers.forResource('search')).toBe(headers.forResource('search'));
    expect(headers.forResource('search').record()).toMatchObject({
      'x-ratelimit-limit': '4',
      'x-ratelimit-remaining': '4',
      'x-ratelimit-resource': 'search',
    });
    expect(headers.record()).toMatchObject({ 'x-ratelimit-limit': '10000', 'x-ratelimit-resource': 'core' });
    expect(headers.flat('a', 'search')).toContain('search');
    const out: Record<string, string | string[] | undefined> = { 'x-ratelimit-resource': 'core', 'x-ratelimit-limit': '5000' };
    headers.forResource('code_search').apply(out, 'a');
    expect(out).toMatchObject({ 'x-ratelimit-resource': 'code_search', 'x-ratelimit-limit': '0', 'x-etagere-token': 'a' });
    const body = JSON.parse(poolRateLimitBody(headers, tokens.rateLimits()).body.toString()) as {
      resources: Record<string, { limit: number; resource: string }>;
      rate: { limit: number };
    };
    expect(Object.keys(body.resources)).toEqual(['core', 'search']);
    expect(body.resources.search).toMatchObject({ limit: 4, resource: 'search' });
    expect(body.rate.limit).toBe(10_000);
  });
});

describe('confirming a 401 costs at most one probe per token per minute', () => {
  it('probes once, shares the answer with concurrent callers, and asks again a minute later', async () => {
    const clock = { now: NOW };
    const probed: string[] = [];
    let answer = 200;
    const confirmer = createConfirmer({
      names: ['a', 'b'],
      now: () => clock.now,
      probe: (name) => {
        probed.push(name);
        return Promise.resolve(answer);
      },
    });
    const first = await Promise.all(Array.from({ length: 20 }, () => confirmer.confirm('a')));
    expect(first.every((result) => result === 'alive')).toBe(true);
    expect(probed).toEqual(['a']);
    for (let i = 0; i < 50; i++) expect(await confirmer.confirm('a')).toBe('alive');
    expect(probed).toEqual(['a']);
    // A "Bad credentials" 401 is its own kind: an App-only burst never delays noticing a revocation.
    answer = 401;
    expect(await confirmer.confirm('a', 'credentials')).toBe('dead');
    expect(await confirmer.confirm('a', 'credentials')).toBe('dead');
    expect(probed).toEqual(['a', 'a']);
    answer = 401;
    clock.now += CONFIRM_INTERVAL_MS - 1;
    expect(await confirmer.confirm('a')).toBe('alive'); // still the memo
    clock.now += 1;
    expect(await confirmer.confirm('a')).toBe('dead');
    expect(await confirmer.confirm('b')).toBe('dead');
    expect(probed).toEqual(['a', 'a', 'a', 'b']);
    // The revive timer probes whatever the memo says.
    answer = 200;
    expect(await confirmer.probeNow('a')).toBe('alive');
    expect(probed).toEqual(['a', 'a', 'a', 'b', 'a']);
  });

  it('hostile: unknown token names never probe; a failing probe is unknown and counts as a probe', async () => {
    const clock = { now: NOW };
    let probes = 0;
    const confirmer = createConfirmer({
      names: ['a'],
      now: () => clock.now,
      probe: () => {
        probes++;
        return probes === 1 ? Promise.reject(new Error('boom')) : Promise.resolve(undefined);
      },
    });
    expect(await confirmer.confirm('nope')).toBe('unknown');
    expect(await confirmer.confirm('__proto__')).toBe('unknown');
    expect(await confirmer.confirm('a')).toBe('unknown');
    expect(await confirmer.confirm('a')).toBe('unknown');
    expect(probes).toBe(1);
    expect([401, 200, 204, 403, 500, undefined].map(confirmationOf)).toEqual(['dead', 'alive', 'alive', 'unknown', 'unknown', 'unknown']);
    expect(unauthorizedKind('{"message":"Bad credentials","documentation_url":"x"}')).toBe('credentials');
    for (const other of [
      undefined,
      '',
      'Bad credentials',
      '{"message":"A JSON web token could not be decoded"}',
      `${' '.repeat(600)}{"message":"Bad credentials"}`,
    ])
      expect(unauthorizedKind(other)).toBe('request');
  });

  it('hostile: a 401 carrying spent numbers (remaining 0) changes no budget', async () => {
    const tokens = pool();
    for (let i = 0; i < 4; i++) {
      const lease = leaseOf(await tokens.acquire());
      expect(lease.settle(401, headersOf({ limit: 60, remaining: 0, reset: NOW_S + 3600 }), undefined)).toEqual({ kind: 'unauthorized' });
    }
    expect(tokens.rateLimit()).toMatchObject({ limit: 10_000, remaining: 10_000 });
    expect(tokens.snapshot().map((row) => row.state)).toEqual(['ok', 'ok']);
  });

  it("a request's 401 changes no token; GET /rate_limit's 401 kills it and its 200 revives it (counted)", async () => {
    const events: string[] = [];
    const tokens = createTokenPool({
      tokens: [{ name: 'a', value: 'va' }],
      equivalent: true,
      perTokenConcurrency: 4,
      maxConcurrency: 4,
      queueTimeoutMs: 0,
      maxQueue: 1,
      now: () => NOW,
      events: { dead: (name) => events.push(`dead ${name}`), revived: (name) => events.push(`revived ${name}`) },
    });
    for (let i = 0; i < 5; i++)
      expect(leaseOf(await tokens.acquire()).settle(401, () => undefined, undefined)).toEqual({ kind: 'unauthorized' });
    expect(tokens.snapshot()[0]!.state).not.toBe('dead');
    tokens.learn('a', 401, undefined);
    tokens.learn('a', 401, undefined); // a renewed confirmation is not a second death
    expect(tokens.snapshot()[0]!.state).toBe('dead');
    expect(await tokens.acquire()).toMatchObject({ kind: 'unavailable', reason: 'dead' });
    tokens.learn('a', 200, { limit: 5000, remaining: 4999, reset: NOW_S + 60, resource: 'core' });
    expect(tokens.snapshot()[0]!.state).toBe('ok');
    expect(events).toEqual(['dead a', 'revived a']);
  });
});

describe('rate-limit resources and 401 confirmation over IPC (cluster workers without Redis)', () => {
  it("a worker's requests wait in the primary's queue as their consumer's, within that consumer's bound", async () => {
    // One token, one slot; max_queue 3 over weights greedy 1 + polite 1 + unkeyed 1: one waiter each.
    const owned = createTokenPool({
      tokens: [{ name: 'a', value: 'va' }],
      equivalent: true,
      perTokenConcurrency: 1,
      maxConcurrency: 1,
      queueTimeoutMs: 60_000,
      maxQueue: 3,
      consumerWeights: new Map([
        ['greedy', 1],
        ['polite', 1],
      ]),
    });
    const { primary, worker } = channelPair();
    const served = servePool(owned, primary);
    const remote = createIpcTokenPool(worker, ['a'], true, new Map([['a', 'token va']]));
    const first = leaseOf(await remote.acquire({ consumer: 'greedy' }));
    const waiting = remote.acquire({ consumer: 'greedy', weight: 1 });
    await until(() => owned.queueLength() === 1, 2_000, 'the first waiter to queue at the primary');
    expect(await remote.acquire({ consumer: 'greedy', weight: 1 })).toEqual({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
    const polite = remote.acquire({ consumer: 'polite', weight: 1 });
    await until(() => owned.queueLength() === 2, 2_000, "the other consumer's request to queue");
    first.cancel();
    leaseOf(await waiting).cancel();
    expect(leaseOf(await polite).name).toBe('a');
    served.close();
    remote.close();
    owned.close();
  });

  it("a worker reserves in its request's resource and asks the primary to confirm a 401", async () => {
    const owned = pool();
    const confirmed: string[] = [];
    const primaryPool = { ...owned, confirm: (name: string): Promise<Confirmation> => (confirmed.push(name), Promise.resolve('dead')) };
    const { primary, worker } = channelPair();
    const served = servePool(primaryPool, primary);
    const remote = createIpcTokenPool(
      worker,
      ['a', 'b'],
      true,
      new Map([
        ['a', 'token va'],
        ['b', 'token vb'],
      ]),
    );
    const lease = leaseOf(await remote.acquire({ resource: 'search' }));
    expect(lease.resource).toBe('search');
    lease.settle(
      403,
      headersOf({ limit: 2, remaining: 0, reset: NOW_S + 60, resource: 'search' }),
      '{"message":"API rate limit exceeded"}',
    );
    const other = leaseOf(await remote.acquire({ resource: 'search' }));
    expect(other.name).not.toBe(lease.name);
    other.settle(200, headersOf({ limit: 2, remaining: 1, reset: NOW_S + 60, resource: 'search' }), undefined);
    expect(leaseOf(await remote.acquire()).resource).toBe('core');
    expect(await remote.confirm!('a')).toBe('dead');
    expect(confirmed).toEqual(['a']);
    served.push();
    await until(() => remote.rateLimit('search').limit === 4, 2_000, "the primary's state to reach the worker");
    expect(remote.rateLimit('search')).toMatchObject({ limit: 4, remaining: 1 });
    expect(remote.rateLimits().core).toMatchObject({ limit: 10_000 });
    served.close();
    remote.close();
    owned.close();
  });
});
