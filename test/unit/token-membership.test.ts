/**
 * Token rotation without restart, the pure parts and the in-process pool: the membership diff
 * (kept / updated / added / removed by name and value), the checks of a new list (positions,
 * never values), the tokens file's parser, which directory events concern the file, and
 * `replaceMembers` on the local pool (state kept, in-flight leases finishing on the old member or
 * the old value, waiters served by a new member).
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseTokensFile } from '../../src/platform/config/load.js';
import { createTokenPool } from '../../src/pool/backends/local-pool.js';
import { changesAnything, diffMembers, membersProblem } from '../../src/pool/rules/membership.js';
import { concernsFile } from '../../src/pool/members/watch-file.js';
import type { Acquired, HeaderLookup } from '../../src/pool/rules/types.js';

const NOW = 1_800_000_000_000;
const RESET = NOW / 1000 + 600;
const answer =
  (remaining: number): HeaderLookup =>
  (name) =>
    ({ 'x-ratelimit-limit': '100', 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset': String(RESET) })[name];

const leaseOf = (acquired: Acquired) => {
  if (acquired.kind !== 'lease') throw new Error(`expected a lease, got ${JSON.stringify(acquired)}`);
  return acquired.lease;
};

function pool(
  tokens = [
    { name: 'a', value: 'value_a' },
    { name: 'b', value: 'value_b' },
  ],
  perTokenConcurrency = 5,
) {
  const created = createTokenPool({
    tokens,
    equivalent: true,
    perTokenConcurrency,
    maxConcurrency: 50,
    queueTimeoutMs: 1_000,
    maxQueue: 10,
    now: () => NOW,
  });
  for (const name of created.names) created.learn(name, 200, { limit: 100, remaining: 100, reset: RESET, resource: 'core' });
  return created;
}

describe('membership diff (pure)', () => {
  it('tells kept (same name and value), updated (same name, new value), added and removed members apart, in list order', () => {
    const change = diffMembers(
      [
        { name: 'a', value: '1' },
        { name: 'b', value: '2' },
        { name: 'c', value: '3' },
        { name: 'd', value: '4' },
      ],
      [
        { name: 'e', value: '5' },
        { name: 'c', value: '3' },
        { name: 'a', value: '1-new' },
        { name: 'f', value: '2' }, // b's value under a new name: b leaves and f joins
      ],
    );
    expect(change).toEqual({ added: ['e', 'f'], removed: ['b', 'd'], updated: ['a'], kept: ['c'] });
    expect(changesAnything(change)).toBe(true);
    const same = diffMembers([{ name: 'a', value: '1' }], [{ name: 'a', value: '1' }]);
    expect(same).toEqual({ added: [], removed: [], updated: [], kept: ['a'] });
    expect(changesAnything(same)).toBe(false);
    expect(diffMembers([], [])).toEqual({ added: [], removed: [], updated: [], kept: [] });
  });

  it('hostile: a duplicate value or name is refused by position; the message never holds a value', () => {
    const secret = 'ghp_membershipdup000000000000000000001';
    const sameValue = membersProblem([
      { name: 'a', value: secret, where: 'tokens file line 1' },
      { name: 'b', value: 'other', where: 'tokens file line 2' },
      { name: 'c', value: secret, where: 'tokens file line 4' },
    ]);
    expect(sameValue).toBe('tokens file line 4: the same token as tokens file line 1 (value not shown)');
    const sameName = membersProblem([
      { name: 'a', value: secret, where: 'pool.tokens[0] (ETAGERE_TOKENS or the config)' },
      { name: 'a', value: 'other', where: 'tokens file line 3' },
    ]);
    expect(sameName).toBe('tokens file line 3: duplicate token name "a" (also pool.tokens[0] (ETAGERE_TOKENS or the config))');
    expect(`${sameValue} ${sameName}`).not.toContain(secret);
    expect(membersProblem([{ name: 'a', value: secret, where: 'x' }])).toBeUndefined();
  });
});

describe('the tokens file parser', () => {
  it('numbers lines as the file does (blank and comment lines counted) and keeps names', () => {
    expect(parseTokensFile('# pool\n\nci=tok_one_1234\r\ntok_two_5678\n')).toEqual([
      { name: 'ci', value: 'tok_one_1234', line: 3 },
      { value: 'tok_two_5678', line: 4 },
    ]);
    expect(parseTokensFile('')).toEqual([]);
  });

  it('hostile: a malformed line is named by its number, never by its text', () => {
    const secret = 'ghp_malformedline00000000000000000000001';
    for (const [text, line, why] of [
      [`ok=tok_one_1234\n\nbad=${secret} trailing`, 3, 'printable characters without spaces'],
      [`ok=tok_one_1234\n=${secret}`, 2, 'nothing before "="'],
      [`ok=tok_one_1234\nbad name!=${secret}`, 2, 'the name before "="'],
      ['ok=tok_one_1234\nempty=', 2, 'no token after "="'],
    ] as const) {
      let thrown: unknown;
      try {
        parseTokensFile(text);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as Error).message).toContain(`tokens file line ${line}: `);
      expect((thrown as Error).message).toContain(why);
      expect((thrown as Error).message).not.toContain(secret);
    }
  });
});

describe('directory events that may concern the tokens file', () => {
  it('takes the file itself, nameless events and the Kubernetes ..data swap; ignores its neighbours', () => {
    expect(concernsFile('tokens', 'tokens')).toBe(true);
    expect(concernsFile(null, 'tokens')).toBe(true);
    expect(concernsFile('..data', 'tokens')).toBe(true);
    expect(concernsFile('..2026_01_01_00_00_00.123', 'tokens')).toBe(true);
    expect(concernsFile('tokens.swp', 'tokens')).toBe(false);
    expect(concernsFile('other.log', 'tokens')).toBe(false);
  });
});

describe('replaceMembers on the in-process pool', () => {
  it('keeps a kept member learned state, starts an added one unseen, and drops a removed one from choice', async () => {
    const tokenPool = pool();
    leaseOf(await tokenPool.acquire({ prefer: 'a' })).settle(200, answer(40), undefined);
    expect(tokenPool.generation()).toBe(0);
    const change = tokenPool.replaceMembers([
      { name: 'a', value: 'value_a' },
      { name: 'c', value: 'value_c' },
    ]);
    expect(change).toEqual({ added: ['c'], removed: ['b'], updated: [], kept: ['a'] });
    expect(tokenPool.generation()).toBe(1);
    expect(tokenPool.names).toEqual(['a', 'c']);
    const rows = tokenPool.snapshot();
    expect(rows.map((row) => [row.name, row.state, row.remaining])).toEqual([
      ['a', 'ok', 40],
      ['c', 'unknown', null],
    ]);
    expect(tokenPool.authorizationOf('b')).toBeUndefined();
    expect(tokenPool.authorizationOf('c')).toBe('token value_c');
    for (let i = 0; i < 20; i++) {
      const lease = leaseOf(await tokenPool.acquire({ prefer: 'b' }));
      expect(lease.name).not.toBe('b');
      lease.cancel();
    }
    // Learning about a name that left changes nothing (a late probe answer).
    tokenPool.learn('b', 401, undefined);
    expect(tokenPool.snapshot().map((row) => row.name)).toEqual(['a', 'c']);
    // The same list again changes nothing, and is not a new generation.
    expect(
      changesAnything(
        tokenPool.replaceMembers([
          { name: 'a', value: 'value_a' },
          { name: 'c', value: 'value_c' },
        ]),
      ),
    ).toBe(false);
    expect(tokenPool.generation()).toBe(1);
  });

  it('lets a lease in flight on a removed member settle, and frees its slot for the others', async () => {
    const tokenPool = pool([{ name: 'a', value: 'value_a' }], 1);
    const inFlight = leaseOf(await tokenPool.acquire());
    expect(inFlight.authorization).toBe('token value_a');
    const waiting = tokenPool.acquire(); // a is at its cap: waits
    expect(tokenPool.queueLength()).toBe(1);
    tokenPool.replaceMembers([{ name: 'b', value: 'value_b' }]);
    // The waiter is served at once by the new member.
    const served = leaseOf(await waiting);
    expect(served.name).toBe('b');
    expect(served.authorization).toBe('token value_b');
    // The old lease settles as usual: nothing throws, and the pool's count of leases drops.
    expect(inFlight.settle(200, answer(10), undefined)).toEqual({ kind: 'ok' });
    expect(tokenPool.snapshot().map((row) => [row.name, row.in_flight])).toEqual([['b', 1]]);
    served.settle(200, answer(99), undefined);
    expect(tokenPool.snapshot()[0]!.in_flight).toBe(0);
  });

  it('updates a member in place: same name and budget, the new value for new leases, the old one for leases in flight', async () => {
    const tokenPool = pool();
    const before = leaseOf(await tokenPool.acquire({ prefer: 'a' }));
    expect(before.authorization).toBe('token value_a');
    tokenPool.learn('a', 401, undefined); // the old credential was refused: dead
    expect(tokenPool.snapshot()[0]!.state).toBe('dead');
    const change = tokenPool.replaceMembers([
      { name: 'a', value: 'value_a_reminted' },
      { name: 'b', value: 'value_b' },
    ]);
    expect(change).toEqual({ added: [], removed: [], updated: ['a'], kept: ['b'] });
    const row = tokenPool.snapshot()[0]!;
    expect(row).toMatchObject({ name: 'a', state: 'ok', remaining: 100, in_flight: 1 });
    expect(tokenPool.authorizationOf('a')).toBe('token value_a_reminted');
    const after = leaseOf(await tokenPool.acquire({ prefer: 'a' }));
    expect(after.authorization).toBe('token value_a_reminted');
    expect(before.authorization).toBe('token value_a'); // the lease in flight keeps what it was given
    before.settle(200, answer(70), undefined);
    after.settle(200, answer(69), undefined);
    expect(tokenPool.snapshot()[0]).toMatchObject({ name: 'a', remaining: 69, in_flight: 0 });
    expect(JSON.stringify(tokenPool.snapshot())).not.toContain('value_a');
  });

  it('hostile: an empty membership answers every request with a clear refusal, and new members bring it back', async () => {
    const tokenPool = pool();
    tokenPool.replaceMembers([]);
    expect(tokenPool.names).toEqual([]);
    expect(await tokenPool.acquire()).toMatchObject({ kind: 'unavailable', reason: 'dead' });
    tokenPool.replaceMembers([{ name: 'z', value: 'value_z' }]);
    expect(leaseOf(await tokenPool.acquire()).name).toBe('z');
  });
});
