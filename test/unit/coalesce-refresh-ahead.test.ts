/**
 * A refresh ahead of expiry takes the cross-replica flight lock although it revalidates, and
 * follows another replica only when that one stored a newer entry: the entry it revalidates is in
 * L2 already and is no answer.
 */
import { describe, expect, it } from 'vitest';
import { createCoalescer } from '../../src/cache/store/coalesce.js';
import type { LockResult } from '../../src/cache/store/flight-lock.js';
import type { CacheEntry } from '../../src/cache/rules/entry.js';
import { type CacheRequest, keysFor } from '../../src/cache/rules/request.js';
import { POOL } from '../../src/cache/rules/key.js';
import type { Cache } from '../../src/cache/store/cache.js';
import type { Metrics } from '../../src/platform/metrics/registry.js';

const input = { upstream: 'github', pathname: '/repos/o/r', search: '', accept: undefined, apiVersion: undefined, partition: POOL };
const req = { keys: keysFor(input, undefined) } as unknown as CacheRequest;
const entry = (storedAt: number) => ({ storedAt }) as CacheEntry;

function setup(lock: LockResult['kind'], inL2: CacheEntry | undefined) {
  const calls: string[] = [];
  const waitedNewerThan: Array<number | undefined> = [];
  const tiers = {
    shared: {
      lock: {
        acquire: (key: string) => {
          calls.push(`acquire ${key}`);
          return Promise.resolve(lock === 'won' ? { kind: 'won', release: () => Promise.resolve() } : { kind: lock });
        },
        waitFor: (_key: string, _deadline: number, newerThan?: number) => {
          waitedNewerThan.push(newerThan);
          return Promise.resolve(
            inL2 !== undefined && (newerThan === undefined || inL2.storedAt > newerThan)
              ? { kind: 'entry', entry: inL2 }
              : { kind: 'gone' },
          );
        },
      },
      l2: { get: () => Promise.resolve(inL2 === undefined ? { kind: 'miss' } : { kind: 'hit', entry: inL2 }) },
    },
    usable: (_req: CacheRequest, found: CacheEntry | undefined) => found,
    promote: (_key: string, found: CacheEntry) => found,
    written: () => Promise.resolve(),
  } as unknown as Cache;
  const metrics = { flightLocks: { inc: () => undefined } } as unknown as Metrics;
  return { calls, waitedNewerThan, coalescer: createCoalescer(tiers, metrics, 100) };
}

const fetched = () => Promise.resolve({ kind: 'entry', fwdStatus: 304 } as never);

describe('a refresh ahead across replicas', () => {
  it('a plain revalidation takes no lock; a refresh ahead does', async () => {
    const plain = setup('won', entry(1));
    await plain.coalescer.run(req, entry(1), true, fetched).promise;
    expect(plain.calls).toEqual([]);
    const ahead = setup('won', entry(1));
    await ahead.coalescer.run(req, entry(1), true, fetched, undefined, true).promise;
    expect(ahead.calls).toHaveLength(1);
  });

  it('under the lock, the same entry in L2 is no answer: it goes upstream', async () => {
    const { coalescer } = setup('won', entry(1));
    expect((await coalescer.run(req, entry(1), true, fetched, undefined, true).promise).kind).toBe('entry');
  });

  it('under the lock, a newer entry in L2 (another replica refreshed it) is followed', async () => {
    const { coalescer } = setup('won', entry(2));
    expect(await coalescer.run(req, entry(1), true, fetched, undefined, true).promise).toEqual({ kind: 'followed', entry: entry(2) });
  });

  it('a lost lock waits for an entry newer than the one it revalidates, and follows it', async () => {
    const { coalescer, waitedNewerThan } = setup('lost', entry(2));
    expect(await coalescer.run(req, entry(1), true, fetched, undefined, true).promise).toEqual({ kind: 'followed', entry: entry(2) });
    expect(waitedNewerThan).toEqual([1]);
  });
});
