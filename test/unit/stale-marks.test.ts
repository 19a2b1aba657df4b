/**
 * Marking stale by path scope: the normal form and scope ids (stale-marks.ts), the index of L1's
 * keys (memory-store.ts) kept by the memory store's hooks, the marks (stale-marks.ts) and the cache
 * that uses them (memory-store.ts, validity.ts, cache.ts), and the webhook signature (src/paths/webhooks/signature.ts).
 */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { CacheEntry } from '../../src/cache/rules/entry.js';
import { cacheKey } from '../../src/cache/rules/key.js';
import { createMemoryStore, createPathIndex } from '../../src/cache/store/memory-store.js';
import {
  coveringScopeIds,
  keyPath,
  normalPath,
  parseScopeId,
  scopeId,
  createStaleMarks,
  markedStale,
  originOf,
} from '../../src/cache/rules/stale-marks.js';
import { Cache } from '../../src/cache/store/cache.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import { signatureOf, verifySignature } from '../../src/paths/webhooks/signature.js';
import { testEntry } from '../helpers/entry.js';

const entry = (over: Partial<CacheEntry> = {}): CacheEntry => testEntry({ etag: 'W/"1"', staleWhileRevalidate: 30, ...over });

const key = (path: string, partition = 'anon', query = ''): string =>
  cacheKey({ upstream: 'github', pathname: path, search: query, accept: undefined, apiVersion: undefined, partition });

describe('path scopes', () => {
  it('compare paths in one normal form: case, plain percent-escapes, trailing slash', () => {
    expect(normalPath('/repos/OctoCat/Hello%2DWorld/')).toBe('/repos/octocat/hello-world');
    expect(normalPath('/repos/o/r%20x')).toBe('/repos/o/r%20x'); // a space stays escaped
    expect(normalPath('/')).toBe('/');
    expect(keyPath(key('/Repos/O/R', 'c:abc', '?page=2'))).toEqual({ upstream: 'github', path: '/repos/o/r' });
  });

  it('name every scope that covers a path, and round-trip their ids', () => {
    expect(coveringScopeIds('gh', '/repos/o/r')).toEqual([
      'gh\nx\n/repos/o/r',
      'gh\np\n/',
      'gh\np\n/repos',
      'gh\np\n/repos/o',
      'gh\np\n/repos/o/r',
    ]);
    const scope = { upstream: 'gh', path: '/repos/o', prefix: true };
    expect(parseScopeId(scopeId(scope))).toEqual(scope);
    expect(parseScopeId('garbage')).toBeUndefined();
    expect(parseScopeId('gh\nq\n/x')).toBeUndefined();
  });
});

describe('the path index of L1', () => {
  it('finds the keys of an exact path or of a prefix on whole segments, and forgets removed keys', () => {
    const index = createPathIndex();
    const keys = [
      key('/repos/o/r'),
      key('/repos/o/r', 'pool', '?x=1'),
      key('/repos/o/r/issues/1'),
      key('/repos/o/rx'),
      key('/repos/other/r'),
    ];
    for (const one of keys) index.add(one);
    index.add(keys[0]!); // twice: once
    expect(index.size).toBe(5);
    expect(index.keysIn({ upstream: 'github', path: '/repos/o/r', prefix: false }).sort()).toEqual([keys[0], keys[1]].sort());
    expect(index.keysIn({ upstream: 'github', path: '/repos/o/r', prefix: true }).sort()).toEqual([keys[0], keys[1], keys[2]].sort());
    expect(index.keysIn({ upstream: 'github', path: '/repos/o', prefix: true })).toHaveLength(4);
    expect(index.keysIn({ upstream: 'other', path: '/', prefix: true })).toEqual([]);
    for (const one of keys) index.remove(one);
    index.remove(keys[0]!);
    expect(index.size).toBe(0);
    expect(index.keysIn({ upstream: 'github', path: '/', prefix: true })).toEqual([]);
  });

  it('stays in step with the LRU through evictions, replacements, oversized values and expiry', async () => {
    const index = createPathIndex();
    const store = createMemoryStore({ maxBytes: 4000, maxEntryBytes: 2500, onKeys: { added: index.add, removed: index.remove } });
    for (let at = 0; at < 20; at++) store.set(key(`/repos/o/r${at}`), entry(), 60_000);
    expect(store.size).toBeLessThan(20); // the bound evicted some
    expect(index.size).toBe(store.size);
    const kept = [...store.keys()][0]!;
    store.set(kept, entry({ etag: 'W/"2"' }), 60_000); // replaced: still held
    expect(index.size).toBe(store.size);
    store.set(kept, entry({ body: Buffer.alloc(3000) }), 60_000); // over the entry cap: dropped
    expect(store.get(kept)).toBeUndefined();
    expect(index.size).toBe(store.size);
    const short = key('/repos/o/short');
    store.set(short, entry(), 1);
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(store.get(short)).toBeUndefined(); // expired on access
    expect(index.size).toBe(store.size);
    store.clear();
    expect(index.size).toBe(0);
  });
});

describe('stale marks', () => {
  const settings = { horizonMs: 60_000, maxScopes: 3, maxPending: 10 };

  it('an entry is stale when a covering mark is at or after its origin (received less its age)', () => {
    const marks = createStaleMarks(settings);
    const mark = { at: 10_000, source: 'webhook' as const, observed: false };
    marks.remember([scopeId({ upstream: 'github', path: '/repos/o', prefix: true })], mark);
    expect(marks.covering(key('/repos/o/r/issues'), 9_000, 10_500)).toBe(mark);
    expect(marks.covering(key('/repos/o/r/issues'), 10_001, 10_500)).toBeUndefined(); // fetched after
    expect(marks.covering(key('/repos/other/r'), 0, 10_500)).toBeUndefined();
    expect(originOf({ storedAt: 10_500, initialAge: 1 })).toBe(9_500);
    // Recorded to the millisecond (its request went upstream then), not taken from Date's whole seconds.
    expect(originOf({ storedAt: 10_500, initialAge: 0.9, currentAt: 10_050 })).toBe(10_050);
    expect(marks.covering(key('/repos/o/r'), originOf({ storedAt: 10_500, initialAge: 0.9, currentAt: 10_050 }), 10_600)).toBeUndefined();
    expect(marks.covering(key('/repos/o/r'), originOf({ storedAt: 10_500, initialAge: 0.9, currentAt: 9_950 }), 10_600)).toBe(mark);
    expect(marks.covering(key('/repos/o/r'), 0, 10_000 + 60_001)).toBeUndefined(); // past the horizon
  });

  it('keeps at most maxScopes, the newest', () => {
    const marks = createStaleMarks(settings);
    for (let at = 0; at < 5; at++)
      marks.remember([scopeId({ upstream: 'github', path: `/p${at}`, prefix: false })], { at, source: 'purge', observed: false });
    expect(marks.size).toBe(3);
    expect(marks.covering(key('/p0'), 0, 10)).toBeUndefined();
    expect(marks.covering(key('/p4'), 0, 10)).toBeDefined();
  });

  it('times a delivery once: from the mark to the first revalidation that saw a change', () => {
    const marks = createStaleMarks(settings);
    const mark = { at: 1_000, source: 'webhook' as const, observed: false };
    marks.pending('a', mark);
    marks.pending('b', mark);
    expect(marks.settle('a', false, 1_200)).toBeUndefined(); // a 304: nothing had changed there
    expect(marks.settle('b', true, 1_500)).toBe(0.5);
    marks.pending('c', mark);
    expect(marks.settle('c', true, 1_900)).toBeUndefined(); // that delivery is timed already
    marks.pending('d', { at: 0, source: 'purge', observed: false });
    expect(marks.settle('d', true, 10)).toBeUndefined(); // purges are not deliveries
  });

  it('a marked entry keeps everything but its freshness', () => {
    const fresh = entry();
    const stale = markedStale(fresh);
    expect(stale).toEqual({ ...fresh, lifetime: 0, staleWhileRevalidate: 0 });
    expect(markedStale(stale)).toBe(stale);
  });
});

describe('markStale (one process)', () => {
  const tiersFor = () =>
    new Cache(
      { l1: true, maxBytes: 1 << 26, maxEntryBytes: 1 << 16, lockMs: 1000 },
      createMetrics({ defaultMetrics: false }),
      createLogger({ level: 'silent' }),
      undefined,
    );

  it('marks every partition and query under the scope, keeps the entries, and counts each once', () => {
    const tiers = tiersFor();
    const keys = [key('/repos/o/r'), key('/repos/o/r', 'c:client', '?a=1'), key('/repos/o/r/issues/1', 'pool'), key('/repos/o/x')];
    for (const one of keys) tiers.promote(one, entry());
    const marked = tiers.validity.markStale(
      [
        { upstream: 'github', path: '/repos/o/r', prefix: false },
        { upstream: 'github', path: '/repos/o/r', prefix: true },
      ],
      'webhook',
    );
    expect(marked).toBe(3);
    for (const one of keys.slice(0, 3)) expect(tiers.l1!.peek(one)?.lifetime).toBe(0);
    expect(tiers.l1!.peek(keys[3]!)?.lifetime).toBe(600);
    expect(tiers.l1!.size).toBe(4);
    tiers.close();
  });

  it('a large scope is marked over several turns, never an entry stored after the mark', async () => {
    const tiers = tiersFor();
    const keys = Array.from({ length: 5_000 }, (_, index) => key(`/repos/big/r${index}`));
    for (const one of keys) tiers.promote(one, entry({ storedAt: Date.now() - 1_000 }));
    expect(tiers.validity.markStale([{ upstream: 'github', path: '/repos/big', prefix: true }], 'purge')).toBe(5_000);
    const markedNow = keys.filter((one) => tiers.l1!.peek(one)?.lifetime === 0).length;
    expect(markedNow).toBe(2_000); // the first turn
    const refetched = keys[4_999]!;
    tiers.apply(
      {
        kind: 'entry',
        entry: entry({ storedAt: Date.now() + 5 }),
        fwdStatus: 200,
        storeKey: refetched,
        dropKey: undefined,
        transient: false,
        token: undefined,
      },
      Date.now() + 5,
    );
    for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(keys.slice(0, 4_999).every((one) => tiers.l1!.peek(one)?.lifetime === 0)).toBe(true);
    expect(tiers.l1!.peek(refetched)?.lifetime).toBe(600); // fetched after the mark: fresh
    tiers.close();
  });

  it('an entry arriving later from before the mark is kept stale; one from after it is fresh', () => {
    const tiers = tiersFor();
    tiers.validity.markStale([{ upstream: 'github', path: '/repos/o/r', prefix: true }], 'purge');
    const before = tiers.promote(key('/repos/o/r/pulls'), entry({ storedAt: Date.now() - 5_000 }));
    expect(before.lifetime).toBe(0);
    const after = tiers.promote(key('/repos/o/r/tags'), entry({ storedAt: Date.now() + 1_000 }));
    expect(after.lifetime).toBe(600);
    tiers.close();
  });
});

describe('webhook signatures', () => {
  const body = Buffer.from('{"zen":"Keep it logically awesome."}');
  const secret = 'a-webhook-secret-of-enough-length';

  it("accepts GitHub's header for the body and secret, and nothing else", () => {
    const header = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
    expect(signatureOf(secret, body)).toBe(header);
    expect(verifySignature(secret, body, header)).toBe(true);
    expect(verifySignature(secret, body, header.toUpperCase().replace('SHA256=', 'sha256='))).toBe(true); // hex case
    expect(verifySignature('another-secret-of-enough-length', body, header)).toBe(false);
    expect(verifySignature(secret, Buffer.concat([body, Buffer.from(' ')]), header)).toBe(false);
    for (const bad of [undefined, '', 'sha256=', header.slice(0, -2), `sha1=${'0'.repeat(40)}`, `${header}00`, [header, header]])
      expect(verifySignature(secret, body, bad as string | undefined)).toBe(false);
  });
});
