/**
 * Pool tokens' OAuth scopes: the pure rules (scopes.ts), what the in-process pool learns from its
 * answers and probes, and a cluster worker following the primary's members' scopes.
 */
import { describe, expect, it } from 'vitest';
import { createIpcTokenPool, servePool } from '../../src/pool/backends/ipc-pool.js';
import { createTokenPool } from '../../src/pool/backends/local-pool.js';
import {
  anotherSeesMore,
  learnScopes,
  parseScopes,
  scopeAgreement,
  UNSEEN_SCOPES,
  type ScopeAgreement,
  type ScopesRow,
} from '../../src/pool/rules/scopes.js';
import type { Acquired, HeaderLookup, Lease } from '../../src/pool/rules/types.js';
import { channelPair } from '../helpers/ipc-channel.js';
import { until } from '../helpers/proxy.js';

const row = (name: string, scopes: string[] | null, from: ScopesRow['scopes_from'] = scopes === null ? 'unseen' : 'x-oauth-scopes') => ({
  name,
  scopes,
  scopes_from: from,
});
const headers =
  (values: Record<string, string>): HeaderLookup =>
  (name) =>
    values[name];
const leaseOf = (acquired: Acquired): Lease => {
  if (acquired.kind !== 'lease') throw new Error(`no lease: ${acquired.reason}`);
  return acquired.lease;
};

function pool(equivalent = true) {
  const told: ScopeAgreement[] = [];
  const tokens = createTokenPool({
    tokens: [
      { name: 'a', value: 'value-of-a' },
      { name: 'b', value: 'value-of-b' },
    ],
    equivalent,
    perTokenConcurrency: 10,
    maxConcurrency: 10,
    queueTimeoutMs: 1_000,
    maxQueue: 10,
    events: { scopes: (agreement) => told.push(agreement) },
  });
  return { tokens, told };
}

/** Settles one lease on each token with these X-OAuth-Scopes values (undefined: no header). */
async function answerWith(tokens: ReturnType<typeof pool>['tokens'], scopes: Record<string, string | undefined>): Promise<void> {
  for (const name of Object.keys(scopes)) {
    const lease = leaseOf(await tokens.acquire({ prefer: name }));
    const value = scopes[lease.name];
    lease.settle(200, headers(value === undefined ? {} : { 'x-oauth-scopes': value }), undefined);
  }
}

const microtasks = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('OAuth scopes (pure)', () => {
  it('reads X-OAuth-Scopes as a sorted set, whatever the order and spacing', () => {
    expect(parseScopes('repo, read:org')).toEqual(['read:org', 'repo']);
    expect(parseScopes('read:org,repo ,repo')).toEqual(['read:org', 'repo']);
    expect(parseScopes('')).toEqual([]);
  });

  it('learns a header; its absence marks only an unseen member, and only on a success', () => {
    const classic = learnScopes(UNSEEN_SCOPES, 'repo', 200)!;
    expect(classic).toMatchObject({ from: 'x-oauth-scopes', scopes: ['repo'] });
    expect(learnScopes(classic, 'repo', 200)).toBeUndefined();
    expect(learnScopes(classic, undefined, 200)).toBeUndefined(); // another upstream's answer erases nothing
    expect(learnScopes(UNSEEN_SCOPES, undefined, 404)).toBeUndefined();
    expect(learnScopes(UNSEEN_SCOPES, undefined, 200)).toMatchObject({ from: 'not-sent' });
    expect(learnScopes(classic, '', 200)).toMatchObject({ from: 'x-oauth-scopes', scopes: [] }); // a classic token without scopes
  });

  it('compares classic tokens only: fine-grained and App tokens (no header) and unseen ones are unchecked', () => {
    expect(scopeAgreement([row('a', ['repo']), row('b', ['repo'])])).toMatchObject({ differ: false, unchecked: [] });
    expect(scopeAgreement([row('a', ['repo']), row('app-1', null, 'not-sent'), row('c', null)])).toMatchObject({
      differ: false,
      unchecked: ['app-1', 'c'],
    });
    expect(scopeAgreement([row('a', ['repo']), row('b', []), row('c', ['repo'])])).toEqual({
      differ: true,
      groups: [
        { scopes: ['repo'], tokens: ['a', 'c'] },
        { scopes: [], tokens: ['b'] },
      ],
      unchecked: [],
    });
  });

  it('tries a 404 elsewhere only when the token lacks every accepted scope and an untried member has one', () => {
    const rows = [row('pub', ['public_repo']), row('full', ['repo']), row('app', null, 'not-sent')];
    expect(anotherSeesMore(rows, 'pub', 'repo', new Set())).toBe(true);
    expect(anotherSeesMore(rows, 'pub', 'repo', new Set(['full']))).toBe(false);
    expect(anotherSeesMore(rows, 'full', 'repo', new Set())).toBe(false);
    expect(anotherSeesMore(rows, 'pub', '', new Set())).toBe(false);
    expect(anotherSeesMore(rows, 'pub', undefined, new Set())).toBe(false);
    expect(anotherSeesMore(rows, 'app', 'repo', new Set())).toBe(false); // its permissions are unknown
    expect(anotherSeesMore([rows[0]!, { ...rows[1]!, state: 'dead' }], 'pub', 'repo', new Set())).toBe(false);
  });
});

describe('the pool and its members’ scopes', () => {
  it('stays equivalent while the answers report the same scopes, and is told nothing', async () => {
    const { tokens, told } = pool();
    await answerWith(tokens, { a: 'repo, read:org', b: 'read:org,repo' });
    await microtasks();
    expect(tokens.equivalent).toBe(true);
    expect(told).toEqual([]);
    expect(tokens.snapshot().map((token) => token.scopes)).toEqual([
      ['read:org', 'repo'],
      ['read:org', 'repo'],
    ]);
  });

  it('is not equivalent once ordinary answers report different scopes, and is told once', async () => {
    const { tokens, told } = pool();
    await answerWith(tokens, { a: 'repo', b: 'public_repo' });
    expect(tokens.equivalent).toBe(false); // at once: the next request already uses per-token keys
    await answerWith(tokens, { a: 'repo', b: 'public_repo' });
    await microtasks();
    expect(told).toHaveLength(1);
    expect(told[0]!.groups).toEqual([
      { scopes: ['repo'], tokens: ['a'] },
      { scopes: ['public_repo'], tokens: ['b'] },
    ]);
    expect(JSON.stringify(told)).not.toContain('value-of');
  });

  it('learns from a probe, forgets a replaced value’s scopes, and ignores a lease of the old value', async () => {
    const { tokens, told } = pool();
    tokens.learnScopes('a', 'repo', 200);
    tokens.learnScopes('b', 'public_repo', 200);
    expect(tokens.equivalent).toBe(false);
    const old = leaseOf(await tokens.acquire({ prefer: 'b' }));
    tokens.replaceMembers([
      { name: 'a', value: 'value-of-a' },
      { name: 'b', value: 'value-of-b-2' },
    ]);
    expect(tokens.equivalent).toBe(true); // b's new value is unseen: nothing known differs
    old.settle(200, headers({ 'x-oauth-scopes': 'public_repo' }), undefined);
    expect(tokens.snapshot()[1]).toMatchObject({ scopes: null, scopes_from: 'unseen' });
    tokens.learnScopes('b', 'repo', 200);
    await microtasks();
    expect(tokens.equivalent).toBe(true);
    expect(told.map((agreement) => agreement.differ)).toEqual([true, false]);
  });

  it('with pool.equivalent false stays non-equivalent whatever the scopes', async () => {
    const { tokens } = pool(false);
    await answerWith(tokens, { a: 'repo', b: 'repo' });
    expect(tokens.equivalent).toBe(false);
  });

  it('reaches a cluster worker: its pool is non-equivalent once the primary’s members report different scopes', async () => {
    const { tokens } = pool();
    const { primary, worker } = channelPair();
    const served = servePool(tokens, primary);
    const remote = createIpcTokenPool(worker, ['a', 'b'], true, new Map());
    expect(remote.equivalent).toBe(true);
    // The worker's settles carry X-OAuth-Scopes to the primary, which learns from them.
    for (const [name, scopes] of [
      ['a', 'repo'],
      ['b', 'public_repo'],
    ] as const) {
      const lease = leaseOf(await remote.acquire({ prefer: name }));
      lease.settle(200, headers({ 'x-oauth-scopes': scopes }), undefined);
    }
    await until(() => !tokens.equivalent, 2_000, 'the primary to learn the scopes');
    served.push();
    await until(() => !remote.equivalent, 2_000, "the primary's state to reach the worker");
    expect(remote.snapshot().map((token) => token.scopes)).toEqual([['repo'], ['public_repo']]);
    served.close();
    remote.close();
  });
});
