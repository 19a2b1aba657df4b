import { describe, expect, it } from 'vitest';
import type { CacheEntry } from '../../src/cache/entry.js';
import { createMemoryStore } from '../../src/cache/memory-store.js';
import { createSingleFlight } from '../../src/cache/single-flight.js';

describe('single flight', () => {
  it('runs concurrent work for one key once and shares the result', async () => {
    const sf = createSingleFlight<number>();
    let runs = 0;
    let release!: (v: number) => void;
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
    const a = sf.run('k', () => Promise.reject(new Error('boom')));
    const b = sf.run('k', () => Promise.resolve(1));
    await expect(a.promise).rejects.toThrow('boom');
    await expect(b.promise).rejects.toThrow('boom');
    const c = sf.run('k', () => Promise.resolve(2));
    expect(await c.promise).toBe(2);
  });
  it('keeps keys independent', async () => {
    const sf = createSingleFlight<string>();
    const a = sf.run('a', async () => 'A');
    const b = sf.run('b', async () => 'B');
    expect([a.shared, b.shared]).toEqual([false, false]);
    expect([await a.promise, await b.promise]).toEqual(['A', 'B']);
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
  etag: undefined,
  lastModified: undefined,
  storedAt: 0,
  initialAge: 0,
  lifetime: 60,
  staleIfError: 0,
  staleWhileRevalidate: 0,
  mustRevalidate: false,
  fetchedBy: 'anon',
  vary: null,
});

describe('memory store', () => {
  it('stays within its byte bound by evicting the least recently used', () => {
    let evicted = 0;
    const s = createMemoryStore({ maxBytes: 10_000, maxEntryBytes: 5_000, onEvict: () => evicted++ });
    for (let i = 0; i < 20; i++) s.set(`k${i}`, entry(1000), 60_000);
    expect(s.bytes).toBeLessThanOrEqual(10_000);
    expect(evicted).toBeGreaterThan(0);
    expect(s.get('k19')).toBeDefined();
    expect(s.get('k0')).toBeUndefined();
  });
  it('refuses entries above the per-entry cap', () => {
    const s = createMemoryStore({ maxBytes: 100_000, maxEntryBytes: 2_000 });
    s.set('big', entry(5_000), 60_000);
    expect(s.get('big')).toBeUndefined();
    s.set('small', entry(100), 60_000);
    expect(s.get('small')).toBeDefined();
    s.delete('small');
    expect(s.get('small')).toBeUndefined();
  });
  it('drops entries after their retention time', async () => {
    const s = createMemoryStore({ maxBytes: 100_000, maxEntryBytes: 20_000 });
    s.set('k', entry(10), 1);
    const deadline = Date.now() + 2000;
    while (s.get('k') !== undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    expect(s.get('k')).toBeUndefined();
  });
});
