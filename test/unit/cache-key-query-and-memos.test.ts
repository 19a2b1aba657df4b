/**
 * What a cache key is made of, and the memory the key's memos may hold.
 *
 * Repeated query parameters keep their relative order (the upstream's last value wins), so
 * `?per_page=2&per_page=1` and `?per_page=1&per_page=2` never share an entry.
 * The partition memo (Authorization -> partition) and the route-template memo (path ->
 * template) are bounded in bytes whatever clients send, and they say how much they hold.
 */
import { randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { ANONYMOUS, PARTITION_MEMO_BYTES, cacheKey, createPartitioner, normalizeQuery } from '../../src/cache/rules/key.js';
import { ROUTE_MEMO_BYTES, createRouteMatcher } from '../../src/http/route.js';

const base = { upstream: 'github', pathname: '/orgs/o/repos', search: '', accept: undefined, apiVersion: undefined, partition: ANONYMOUS };
const keyOf = (search: string): string => cacheKey({ ...base, search });

describe('repeated query parameters keep their order', () => {
  it('?per_page=2&per_page=1 and ?per_page=1&per_page=2 have different keys', () => {
    expect(keyOf('?per_page=2&per_page=1')).not.toBe(keyOf('?per_page=1&per_page=2'));
  });

  it('parameters of different names are still sorted, stably', () => {
    expect(normalizeQuery('?page=2&per_page=5&per_page=1')).toBe('page=2&per_page=5&per_page=1');
    expect(normalizeQuery('?per_page=5&page=2&per_page=1')).toBe('page=2&per_page=5&per_page=1');
    expect(normalizeQuery('?per_page=1&page=2&per_page=5')).toBe('page=2&per_page=1&per_page=5');
    expect(keyOf('?b=2&a=1')).toBe(keyOf('?a=1&b=2'));
    expect(normalizeQuery('?labels[]=b&state=open&labels[]=a')).toBe('labels[]=b&labels[]=a&state=open');
  });

  it('hostile: a percent-encoded spelling of a name is the same name (the upstream decodes it)', () => {
    // per%5Fpage is per_page once decoded: the two orders are answered differently upstream.
    expect(keyOf('?per_page=1&per%5Fpage=2')).not.toBe(keyOf('?per%5Fpage=2&per_page=1'));
    expect(keyOf('?a+b=1&a%20b=2')).not.toBe(keyOf('?a%20b=2&a+b=1'));
    // A name that does not decode (a lone %) is compared as it is, and never throws.
    expect(keyOf('?%zz=1&%zz=2')).not.toBe(keyOf('?%zz=2&%zz=1'));
    expect(normalizeQuery('?b=1&%E0%A4%A=2')).toBe('%E0%A4%A=2&b=1');
  });

  it('hostile: a value holding "=" or an empty name does not move a parameter', () => {
    expect(keyOf('?q=a=b&q=c')).not.toBe(keyOf('?q=c&q=a=b'));
    expect(keyOf('?=1&=2')).not.toBe(keyOf('?=2&=1'));
    expect(keyOf('?flag&flag=1')).not.toBe(keyOf('?flag=1&flag'));
  });
});

/** Heap in use after a full collection (gc exposed to this worker for the measurement). */
function heapAfterGc(): number {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** 3,000 distinct flat strings of 8,000 characters (the shape of a long Authorization value or path). */
function longValues(prefix: string): () => string {
  let index = 0;
  return () => `${prefix}${index++}-${randomBytes(6000).toString('base64')}`;
}

describe('the memos of credentials and paths are bounded in bytes', () => {
  it('3,000 long Authorization values leave less than 4 MB in the partition memo', () => {
    const partitioner = createPartitioner('secret-secret-secret-secret');
    const next = longValues('token ');
    const before = heapAfterGc();
    for (let index = 0; index < 3_000; index++) partitioner.partitionOf(next());
    const held = heapAfterGc() - before;
    expect(held).toBeLessThan(4 * 1024 * 1024);
    expect(partitioner.memoBytes).toBeGreaterThanOrEqual(0);
    expect(partitioner.memoBytes).toBeLessThanOrEqual(PARTITION_MEMO_BYTES);
  });

  it('3,000 long paths leave less than 4 MB in the route-template memo', () => {
    const matcher = createRouteMatcher([]);
    const next = longValues('/repos/o/');
    const before = heapAfterGc();
    for (let index = 0; index < 3_000; index++) matcher.match(next());
    const held = heapAfterGc() - before;
    expect(held).toBeLessThan(4 * 1024 * 1024);
    expect(matcher.memoBytes).toBeLessThanOrEqual(ROUTE_MEMO_BYTES);
  });

  it('short, common values are still memoised (the hit path keeps its memo)', () => {
    const partitioner = createPartitioner('secret-secret-secret-secret');
    partitioner.partitionOf('token ghp_0123456789abcdefghijklmnopqrstuvwxyz');
    expect(partitioner.memoBytes).toBeGreaterThan(0);
    const matcher = createRouteMatcher([]);
    expect(matcher.match('/repos/octocat/hello-world')).toBe('/repos/{owner}/{repo}');
    expect(matcher.memoBytes).toBeGreaterThan(0);
    // Past the bound the memo starts over; answers stay the same.
    const first = partitioner.partitionOf('token one');
    for (let index = 0; index < 20_000; index++) partitioner.partitionOf(`token ${index}-${'x'.repeat(100)}`);
    expect(partitioner.memoBytes).toBeLessThanOrEqual(PARTITION_MEMO_BYTES);
    expect(partitioner.partitionOf('token one')).toBe(first);
  });
});
