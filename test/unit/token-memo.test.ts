/**
 * A hit on a pool of non-equivalent tokens costs one key and at most one L1 probe, whatever the
 * number of tokens (src/cache/store/token-memo.ts): none while L1 and the members have not changed
 * since the flight key was last answered (one map lookup). The memo points at the token whose entry
 * was last stored or chosen; a removed member's entry is never served, a stale or missing memoized
 * entry falls back to every member's, and the memo is bounded.
 */
import { describe, expect, it } from 'vitest';
import type { CacheEntry } from '../../src/cache/rules/entry.js';
import { POOL, cacheKey, keyAround, type KeyInput } from '../../src/cache/rules/key.js';
import { keysFor, type CacheRequest, type PoolMembers } from '../../src/cache/rules/request.js';
import { Cache } from '../../src/cache/store/cache.js';
import { createTokenMemo } from '../../src/cache/store/token-memo.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import { poolEntry, storedBy } from '../helpers/entry.js';

const NAMES = Array.from({ length: 50 }, (_, index) => `t${String(index + 1).padStart(2, '0')}`);

/** A pool's members that can lose and regain tokens; counts how often the full list is read. */
function members(names: readonly string[] = NAMES) {
  const current = new Set(names);
  let listed = 0;
  let generation = 0;
  const view: PoolMembers & { remove(name: string): void; readonly listed: number } = {
    get names() {
      listed++;
      return [...current];
    },
    has: (name) => current.has(name),
    remove: (name) => {
      current.delete(name);
      generation++;
    },
    get listed() {
      return listed;
    },
    get generation() {
      return generation;
    },
  };
  return view;
}

const input = (pathname = '/users/carol', extra: Partial<KeyInput> = {}): KeyInput => ({
  upstream: 'github',
  pathname,
  search: '?b=2&a=1',
  accept: 'application/vnd.github+json',
  apiVersion: undefined,
  partition: POOL,
  ...extra,
});

function request(pool: PoolMembers, pathname?: string, headers: Record<string, string> = {}): CacheRequest {
  return {
    keys: keysFor(input(pathname), pool),
    upstream: 'github',
    pathname: pathname ?? '/users/carol',
    method: 'GET',
    directives: {},
    header: (name) => headers[name],
    credential: 'pool',
    policy: { kind: 'max-age' } as CacheRequest['policy'],
  };
}

/** A cache whose L1 counts its probes. */
function countingTiers(): { tiers: Cache; probes: () => number } {
  const tiers = new Cache(
    { l1: true, maxBytes: 1 << 26, maxEntryBytes: 1 << 16, lockMs: 1000 },
    createMetrics({ defaultMetrics: false }),
    createLogger({ level: 'silent' }),
    undefined,
  );
  let count = 0;
  const get = tiers.l1!.get.bind(tiers.l1);
  (tiers.l1 as { get: typeof get }).get = (key) => {
    count++;
    return get(key);
  };
  return { tiers, probes: () => count };
}

const bodyOf = (found: CacheEntry | undefined): string | undefined => found?.body.toString();

describe('per-token keys (non-equivalent pool tokens)', () => {
  it('are the plain key around the token partition, and build the members list only when asked', () => {
    const pool = members();
    const keys = keysFor(input('/users/carol', { selecting: 'digest' }), pool);
    expect(keys.flight).toBe(cacheKey({ ...input('/users/carol', { selecting: 'digest' }), partition: `${POOL}:*` }));
    expect(keys.store('t07')).toBe(cacheKey({ ...input('/users/carol', { selecting: 'digest' }), partition: `${POOL}:t07` }));
    expect(keys.isMemberKey(keys.store('t07'))).toBe(true);
    expect(pool.listed).toBe(0);
    expect(keys.candidates).toHaveLength(50);
    expect(keys.candidates).toBe(keys.candidates); // built once per request
    expect(keys.candidateTokens[6]).toBe('t07');
    expect(keys.candidates[6]).toBe(keys.store('t07'));
    expect(pool.listed).toBe(1);
  });

  it('hostile: a token that is not a member has no key to look in', () => {
    const pool = members();
    const keys = keysFor(input('/users/carol', { selecting: 'digest' }), pool);
    expect(keys.isMemberKey(keys.store('t51'))).toBe(false);
    expect(keys.isMemberKey(keys.flight)).toBe(false); // the token '*'
    pool.remove('t07');
    expect(keys.isMemberKey(keys.store('t07'))).toBe(false);
    expect(keys.isMemberKey(keys.store('t08'))).toBe(true);
  });

  it('keyAround splits exactly the key cacheKey builds, with and without selecting headers', () => {
    for (const extra of [{}, { selecting: 'abc' }, { search: '' }]) {
      const { head, tail } = keyAround(input('/repos/o/r', extra));
      expect(`${head}c:xyz${tail}`).toBe(cacheKey({ ...input('/repos/o/r', extra), partition: 'c:xyz' }));
    }
  });
});

describe('the token memo on the L1 hit path', () => {
  it('a hit after a store probes one key, whatever the number of tokens, then none while nothing changed', () => {
    const { tiers, probes } = countingTiers();
    const pool = members();
    const first = request(pool);
    tiers.apply(storedBy(first, 't37', poolEntry('t37')), undefined, first);
    for (let round = 0; round < 3; round++) {
      const before = probes();
      const again = request(pool);
      expect(bodyOf(tiers.held(again))).toBe('{"by":"t37"}');
      expect(probes() - before).toBe(round === 0 ? 1 : 0);
    }
    expect(pool.listed).toBe(0); // the 50 candidate keys were never built
  });

  it('an entry stored, replaced or gone anywhere in L1, or a member gone, ends the lookup-free hits', () => {
    const { tiers, probes } = countingTiers();
    const pool = members();
    const req = request(pool);
    tiers.apply(storedBy(req, 't37', poolEntry('t37')), undefined, req);
    tiers.held(request(pool));
    let before = probes();
    tiers.held(request(pool));
    expect(probes() - before).toBe(0);
    // Another path stored: L1 changed, so the next hit looks again (one probe), and is lookup-free after.
    const other = request(pool, '/users/dave');
    tiers.apply(storedBy(other, 't02', poolEntry('t02')), undefined, other);
    before = probes();
    expect(bodyOf(tiers.held(request(pool)))).toBe('{"by":"t37"}');
    expect(probes() - before).toBe(1);
    // A newer entry of another token replaces what the hit found: the next hit serves it.
    tiers.apply(storedBy(req, 't09', poolEntry('t09', { storedAt: Date.now() + 1 })), undefined, req);
    expect(bodyOf(tiers.held(request(pool)))).toBe('{"by":"t09"}');
    // The token leaves the pool: its entry is never served again, though nothing in L1 changed.
    tiers.held(request(pool));
    pool.remove('t09');
    expect(bodyOf(tiers.held(request(pool)))).toBe('{"by":"t37"}');
  });

  it('without a memo it looks in every member once, then remembers the winner', () => {
    const { tiers, probes } = countingTiers();
    const pool = members();
    const req = request(pool);
    tiers.promote(req.keys.store('t12'), poolEntry('t12')); // as a flight lock follows another replica: no token known
    expect(bodyOf(tiers.held(req))).toBe('{"by":"t12"}');
    expect(probes()).toBe(50);
    expect(bodyOf(tiers.held(request(pool)))).toBe('{"by":"t12"}');
    expect(probes()).toBe(50); // found by the last lookup, nothing changed since: no probe
    expect(tiers.validity.tokens.bytes).toBeGreaterThan(0);
  });

  it('the newest store wins: another token storing later is what the next hit serves', () => {
    const { tiers } = countingTiers();
    const pool = members();
    const req = request(pool);
    tiers.apply(storedBy(req, 't01', poolEntry('t01', { storedAt: Date.now() - 1_000 })), undefined, req);
    tiers.apply(storedBy(req, 't02', poolEntry('t02')), undefined, req);
    expect(bodyOf(tiers.held(request(pool)))).toBe('{"by":"t02"}');
  });

  it('hostile: the memoized token removed from the pool is never served, even with its entry still in L1', () => {
    const { tiers } = countingTiers();
    const pool = members();
    const req = request(pool);
    tiers.apply(storedBy(req, 't05', poolEntry('t05')), undefined, req);
    expect(bodyOf(tiers.held(request(pool)))).toBe('{"by":"t05"}');
    pool.remove('t05');
    expect(tiers.l1!.peek(req.keys.store('t05'))).toBeDefined();
    expect(tiers.held(request(pool))).toBeUndefined();
    // Another member's entry (older than t05's) is what there is to use.
    tiers.promote(req.keys.store('t06'), poolEntry('t06', { storedAt: Date.now() - 1_000 }));
    expect(bodyOf(tiers.held(request(pool)))).toBe('{"by":"t06"}');
  });

  it('a stale memoized entry falls back to a fresher entry of another token, and remembers it', () => {
    const { tiers, probes } = countingTiers();
    const pool = members();
    const req = request(pool);
    tiers.apply(storedBy(req, 't20', poolEntry('t20', { storedAt: Date.now() - 120_000, lifetime: 60 })), undefined, req);
    tiers.promote(req.keys.store('t21'), poolEntry('t21')); // fresh, but the memo does not know it yet
    expect(bodyOf(tiers.held(request(pool)))).toBe('{"by":"t21"}');
    const before = probes();
    expect(bodyOf(tiers.held(request(pool)))).toBe('{"by":"t21"}');
    expect(probes() - before).toBe(0);
  });

  it('hostile: a memoized entry this request may not use (Vary) is not served through the memo', () => {
    const { tiers } = countingTiers();
    const pool = members();
    const req = request(pool);
    tiers.apply(storedBy(req, 't30', poolEntry('t30', { vary: { 'x-flavour': 'sweet' } })), undefined, req);
    tiers.promote(req.keys.store('t31'), poolEntry('t31', { storedAt: Date.now() - 5_000 }));
    const sour = request(pool, undefined, { 'x-flavour': 'sour' });
    // The scan's freshest is t30's again; usable() then refuses it for this request, as before the memo.
    expect(bodyOf(tiers.held(sour))).toBe('{"by":"t30"}');
    expect(tiers.usable(sour, tiers.held(sour))).toBeUndefined();
    expect(bodyOf(tiers.held(request(pool, undefined, { 'x-flavour': 'sweet' })))).toBe('{"by":"t30"}');
  });

  it('is bounded in bytes: many request keys start it over instead of growing it', () => {
    const memo = createTokenMemo(64 * 1024);
    const pool = members();
    for (let index = 0; index < 10_000; index++) memo.remember(keysFor(input(`/repos/o/r${index}`), pool), 't01');
    expect(memo.bytes).toBeLessThanOrEqual(64 * 1024);
    expect(memo.bytes).toBeGreaterThan(0);
  });

  it('hostile: a forgotten memo (bound reached) costs a scan, never a wrong answer', () => {
    const { tiers } = countingTiers();
    const pool = members(['a', 'b']);
    const req = request(pool, '/users/x');
    tiers.apply(storedBy(req, 'a', poolEntry('a')), undefined, req);
    // Flood other request keys through the tiers' memo (each a stored entry), far past its bound.
    const long = 'x'.repeat(3_000);
    for (let index = 0; index < 800; index++) {
      const other = request(pool, `/users/${long}${index}`);
      tiers.apply(storedBy(other, 'b', poolEntry('b')), undefined, other);
    }
    expect(tiers.validity.tokens.bytes).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(bodyOf(tiers.held(request(pool, '/users/x')))).toBe('{"by":"a"}');
  });
});
