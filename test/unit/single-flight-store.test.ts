import { describe, expect, it } from 'vitest';
import { entrySize } from '../../src/cache/store/entry-codec.js';
import type { CacheEntry } from '../../src/cache/rules/entry.js';
import { createMemoryStore } from '../../src/cache/store/memory-store.js';
import { createSingleFlight } from '../../src/cache/store/coalesce.js';

describe('single flight', () => {
  it('runs concurrent work for one key once and shares the result', async () => {
    const sf = createSingleFlight<number>();
    let runs = 0;
    let release!: (value: number) => void;
    const work = () => {
      runs++;
      return new Promise<number>((r) => (release = r));
    };
    const calls = Array.from({ length: 50 }, () => sf.run('k', work));
    expect(calls.filter((c) => !c.shared)).toHaveLength(1);
    expect(sf.waiters).toBe(49);
    release(7);
    expect(await Promise.all(calls.map((c) => c.promise))).toEqual(Array(50).fill(7));
    expect(runs).toBe(1);
    expect(sf.waiters).toBe(0);
    expect(sf.inFlight).toBe(0);
  });
  it('shares a failure with every waiter, then frees the key', async () => {
    const sf = createSingleFlight<number>();
    const failing = sf.run('k', () => Promise.reject(new Error('boom')));
    const waiter = sf.run('k', () => Promise.resolve(1));
    await expect(failing.promise).rejects.toThrow('boom');
    await expect(waiter.promise).rejects.toThrow('boom');
    const after = sf.run('k', () => Promise.resolve(2));
    expect(await after.promise).toBe(2);
  });
  it('keeps keys independent', async () => {
    const sf = createSingleFlight<string>();
    const keyA = sf.run('a', async () => 'A');
    const keyB = sf.run('b', async () => 'B');
    expect([keyA.shared, keyB.shared]).toEqual([false, false]);
    expect([await keyA.promise, await keyB.promise]).toEqual(['A', 'B']);
  });
  it('turns a synchronous throw into a rejection', async () => {
    const sf = createSingleFlight<number>();
    await expect(
      sf.run('k', () => {
        throw new Error('sync');
      }).promise,
    ).rejects.toThrow('sync');
  });
});

const entry = (bytes: number): CacheEntry => ({
  status: 200,
  headers: [['content-type', 'application/json']],
  body: Buffer.alloc(bytes),
  decodedSize: bytes,
  etag: undefined,
  lastModified: undefined,
  storedAt: 0,
  initialAge: 0,
  lifetime: 60,
  staleIfError: 0,
  staleWhileRevalidate: 0,
  mustRevalidate: false,
  fetchedBy: { kind: 'anonymous' },
  vary: null,
});

describe('memory store', () => {
  it('stays within its byte bound by evicting the least recently used', () => {
    let evicted = 0;
    const store = createMemoryStore({ maxBytes: 10_000, maxEntryBytes: 5_000, onEvict: () => evicted++ });
    for (let i = 0; i < 20; i++) store.set(`k${i}`, entry(1000), 60_000);
    expect(store.bytes).toBeLessThanOrEqual(10_000);
    expect(evicted).toBeGreaterThan(0);
    expect(store.get('k19')).toBeDefined();
    expect(store.get('k0')).toBeUndefined();
  });
  it('gives way to what is held beside it: the store and the memo beside it fit in maxBytes together', () => {
    let beside = 0;
    let evicted = 0;
    const forgotten: CacheEntry[] = [];
    const memo = {
      get bytes() {
        return beside;
      },
      forget: (gone: CacheEntry) => forgotten.push(gone),
    };
    const maxBytes = 7 * entrySize('k0', entry(500)) + 100; // room for 7 entries, as entrySize counts them
    const store = createMemoryStore({ maxBytes, maxEntryBytes: 5_000, beside: memo, onEvict: () => evicted++ });
    for (let i = 0; i < 7; i++) store.set(`k${i}`, entry(500), 60_000);
    const full = store.size;
    expect(full).toBe(7);
    expect(store.get('k0')).toBeDefined(); // now the most recently used
    beside = 4_000; // the memo grew, and says so
    store.fit();
    expect(store.bytes + beside).toBeLessThanOrEqual(maxBytes);
    expect(store.size).toBeLessThan(full);
    expect(evicted).toBe(full - store.size);
    expect(store.get('k0')).toBeDefined();
    expect(store.get('k1')).toBeUndefined(); // the least recently used went first
    expect(forgotten).toHaveLength(evicted); // and took its form along
    // A store after that keeps the sum within the bound too.
    for (let i = 7; i < 20; i++) store.set(`k${i}`, entry(500), 60_000);
    expect(store.bytes + beside).toBeLessThanOrEqual(maxBytes);
    expect(store.get('k19')).toBeDefined();
    // An entry replaced or deleted takes its form along too.
    const held = store.get('k19')!;
    store.set('k19', entry(500), 60_000);
    expect(forgotten.at(-1)).toBe(held);
    const replacement = store.get('k19')!;
    store.delete('k19');
    expect(forgotten.at(-1)).toBe(replacement);
  });
  it('refuses entries above the per-entry cap', () => {
    const store = createMemoryStore({ maxBytes: 100_000, maxEntryBytes: 2_000 });
    store.set('big', entry(5_000), 60_000);
    expect(store.get('big')).toBeUndefined();
    store.set('small', entry(100), 60_000);
    expect(store.get('small')).toBeDefined();
    store.delete('small');
    expect(store.get('small')).toBeUndefined();
  });
  it('drops entries after their retention time', async () => {
    const store = createMemoryStore({ maxBytes: 100_000, maxEntryBytes: 20_000 });
    store.set('k', entry(10), 1);
    const deadline = Date.now() + 2000;
    while (store.get('k') !== undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    expect(store.get('k')).toBeUndefined();
  });
});
