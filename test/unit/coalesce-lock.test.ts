/**
 * The cross-replica flight lock is taken only for a plain miss whose flight key is the key its
 * answer is stored under. A pool of non-equivalent tokens stores under per-token keys that are not
 * known before a token is chosen: a replica waiting on such a lock would never find the winner's
 * entry under the flight key, and would fetch after waiting all the same.
 */
import { describe, expect, it } from 'vitest';
import { createCoalescer } from '../../src/cache/store/coalesce.js';
import type { CacheRequest } from '../../src/cache/rules/request.js';
import { keysFor } from '../../src/cache/rules/request.js';
import { POOL } from '../../src/cache/rules/key.js';
import type { Cache } from '../../src/cache/store/cache.js';
import type { Metrics } from '../../src/platform/metrics/registry.js';

const input = { upstream: 'github', pathname: '/repos/o/r', search: '', accept: undefined, apiVersion: undefined, partition: POOL };
const members = { names: ['a', 'b', 'c'], has: (name: string) => ['a', 'b', 'c'].includes(name) };

function setup() {
  const acquired: string[] = [];
  const tiers = {
    shared: {
      lock: {
        acquire: (key: string) => {
          acquired.push(key);
          return Promise.resolve({ kind: 'unavailable' });
        },
      },
    },
  } as unknown as Cache;
  const metrics = { flightLocks: { inc: () => undefined } } as unknown as Metrics;
  return { acquired, coalescer: createCoalescer(tiers, metrics, 0) };
}

const requestOf = (perToken: boolean): CacheRequest =>
  ({ keys: keysFor(input, perToken ? members : undefined) }) as unknown as CacheRequest;
const fetched = () => Promise.resolve({ kind: 'entry' } as never);

describe('the cross-replica flight lock', () => {
  it('is taken for a plain miss stored under its flight key', async () => {
    const { acquired, coalescer } = setup();
    await coalescer.run(requestOf(false), undefined, true, fetched).promise;
    expect(acquired).toHaveLength(1);
  });

  it('is not taken when each non-equivalent pool token stores under its own key', async () => {
    const { acquired, coalescer } = setup();
    await coalescer.run(requestOf(true), undefined, true, fetched).promise;
    expect(acquired).toEqual([]);
  });
});
