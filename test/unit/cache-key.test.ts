import { describe, expect, it } from 'vitest';
import { ANONYMOUS, cacheKey, createPartitioner, normalizeQuery, varyMatches, varySelection } from '../../src/cache/rules/key.js';

const base = { upstream: 'github', pathname: '/repos/a/b', search: '', accept: undefined, apiVersion: undefined, partition: ANONYMOUS };

describe('cache key', () => {
  it.each([
    ['', ''],
    ['?', ''],
    ['?a=1', 'a=1'],
    ['?b=2&a=1', 'a=1&b=2'],
    ['?a=1&b=2', 'a=1&b=2'],
    ['?a=1&&b=2&', 'a=1&b=2'],
    ['?page=2&per_page=5&sort=x', 'page=2&per_page=5&sort=x'],
    ['?per_page=5&sort=x&page=2', 'page=2&per_page=5&sort=x'],
  ])('normalises query %j to %j', (input, out) => {
    expect(normalizeQuery(input)).toBe(out);
  });

  it('gives the same key to the same parameters in any order', () => {
    expect(cacheKey({ ...base, search: '?page=2&per_page=5' })).toBe(cacheKey({ ...base, search: '?per_page=5&page=2' }));
  });

  it('separates everything that can change the body', () => {
    const keys = [
      cacheKey(base),
      cacheKey({ ...base, upstream: 'other' }),
      cacheKey({ ...base, pathname: '/repos/a/c' }),
      cacheKey({ ...base, search: '?page=2' }),
      cacheKey({ ...base, search: '?page=3' }),
      cacheKey({ ...base, accept: 'application/vnd.github.raw+json' }),
      cacheKey({ ...base, apiVersion: '2022-11-28' }),
      cacheKey({ ...base, apiVersion: '2026-03-10' }),
      cacheKey({ ...base, partition: 'c:abc' }),
      cacheKey({ ...base, partition: 'c:abd' }),
      cacheKey({ ...base, selecting: 'xyz' }),
      // Field boundaries cannot be forged by moving text between fields.
      cacheKey({ ...base, pathname: '/repos/a/b\nx' }),
      cacheKey({ ...base, search: '?x', pathname: '/repos/a/b' }),
    ];
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('never contains a credential', () => {
    const partitioner = createPartitioner('s'.repeat(32));
    const token = 'ghp_0123456789abcdefghijklmnopqrstuvwxyz';
    const key = cacheKey({ ...base, partition: partitioner.partitionOf(`token ${token}`) });
    expect(key).not.toContain(token);
    expect(key).not.toContain(token.slice(4, 14));
  });
});

describe('partitions', () => {
  const partitioner = createPartitioner('secret-secret-secret-secret');
  it('puts anonymous requests in one partition', () => {
    expect(partitioner.partitionOf(undefined)).toBe(ANONYMOUS);
    expect(partitioner.partitionOf('')).toBe(ANONYMOUS);
  });
  it('separates credentials and schemes, and is stable for one credential', () => {
    const tokenA = partitioner.partitionOf('token A');
    expect(partitioner.partitionOf('token A')).toBe(tokenA);
    expect(partitioner.partitionOf(' token A ')).toBe(tokenA);
    const all = ['token A', 'token B', 'Bearer A', 'Basic dXNlcjpB', 'Basic dXNlcjpC'].map((v) => partitioner.partitionOf(v));
    expect(new Set(all).size).toBe(all.length);
    expect(all.every((x) => x.startsWith('c:'))).toBe(true);
  });
  it('depends on the secret', () => {
    expect(createPartitioner('one-secret-one-secret').partitionOf('token A')).not.toBe(
      createPartitioner('two-secret-two-secret').partitionOf('token A'),
    );
  });
  it('keeps working past its memo size', () => {
    const small = createPartitioner('secret-secret-secret-secret', 2);
    const first = small.partitionOf('token 1');
    for (let i = 2; i < 10; i++) small.partitionOf(`token ${i}`);
    expect(small.partitionOf('token 1')).toBe(first);
  });
  it('digests Vary-listed headers only when present', () => {
    const none = partitioner.selectingDigest(() => undefined);
    expect(none).toBeUndefined();
    const c1 = partitioner.selectingDigest((n) => (n === 'cookie' ? 'a=1' : undefined));
    const c2 = partitioner.selectingDigest((n) => (n === 'cookie' ? 'a=2' : undefined));
    const otp = partitioner.selectingDigest((n) => (n === 'x-github-otp' ? 'a=1' : undefined));
    expect(new Set([c1, c2, otp]).size).toBe(3);
  });
});

describe('vary', () => {
  const hdr = (h: Record<string, string>) => (n: string) => h[n];
  it('ignores names the key already covers', () => {
    expect(varySelection('Accept, Authorization, Cookie, X-GitHub-OTP, Accept-Encoding, X-Requested-With', hdr({}))).toBeNull();
    expect(varySelection(undefined, hdr({}))).toBeNull();
  });
  it('records other names and matches on them', () => {
    const sel = varySelection('Accept, X-Tenant', hdr({ 'x-tenant': 'a' }));
    expect(sel).toEqual({ 'x-tenant': 'a' });
    expect(varyMatches(sel!, hdr({ 'x-tenant': 'a' }))).toBe(true);
    expect(varyMatches(sel!, hdr({ 'x-tenant': 'b' }))).toBe(false);
    expect(varyMatches(sel!, hdr({}))).toBe(false);
    expect(varyMatches(varySelection('X-Tenant', hdr({}))!, hdr({}))).toBe(true);
  });
  it('reports Vary: * as never reusable', () => {
    expect(varySelection('Accept, *', hdr({}))).toBeUndefined();
  });
});
