import { describe, expect, it } from 'vitest';
import { parseCacheControl, requestDirectives } from '../../src/http/headers/fields.js';
import {
  corruptBody,
  currentAge,
  decide,
  freshnessLifetime,
  initialAge,
  mergeHeaders,
  notStorableReason,
  retentionSeconds,
  staleWindows,
  usableOnError,
  type FreshnessPolicy,
  type StoreInput,
} from '../../src/cache/rules/policy.js';

const policy = (kind: FreshnessPolicy['kind'], extra: Partial<FreshnessPolicy> = {}): FreshnessPolicy => ({
  kind,
  ttl: 30,
  maxAgeCap: undefined,
  staleIfError: 86_400,
  staleWhileRevalidate: 0,
  heuristicFraction: 0,
  ...extra,
});

describe('Cache-Control parsing', () => {
  it('parses GitHub directives', () => {
    expect(parseCacheControl('private, max-age=60, s-maxage=60')).toEqual({ private: true, maxAge: 60, sMaxage: 60 });
    expect(parseCacheControl('public, max-age=60, s-maxage=60')).toEqual({ public: true, maxAge: 60, sMaxage: 60 });
  });
  it.each([
    ['no-store', { noStore: true }],
    ['No-Cache', { noCache: true }],
    ['max-age="30"', { maxAge: 30 }],
    ['max-age=abc', {}],
    ['max-age=-1', {}],
    ['max-stale', { maxStale: Infinity }],
    ['max-stale=5, min-fresh=3', { maxStale: 5, minFresh: 3 }],
    ['only-if-cached', { onlyIfCached: true }],
    ['must-revalidate, proxy-revalidate', { mustRevalidate: true, proxyRevalidate: true }],
    ['stale-if-error=10, stale-while-revalidate=5', { staleIfError: 10, staleWhileRevalidate: 5 }],
    ['max-age=99999999999', { maxAge: 2_147_483_648 }],
    ['', {}],
    [',,, ,', {}],
    ['unknown-thing=4, max-age=1', { maxAge: 1 }],
    ['constructor, __proto__=1, toString', {}],
  ])('%j', (input, out) => {
    expect(parseCacheControl(input)).toEqual(out);
  });
  it('joins repeated header lines', () => {
    expect(parseCacheControl(['max-age=1', 'no-cache'])).toEqual({ maxAge: 1, noCache: true });
  });
  it('honours Pragma: no-cache only without Cache-Control', () => {
    expect(requestDirectives(undefined, 'no-cache')).toEqual({ noCache: true });
    expect(requestDirectives('max-age=5', 'no-cache')).toEqual({ maxAge: 5 });
    expect(requestDirectives(undefined, undefined)).toEqual({});
  });
});

describe('storability', () => {
  const input = (overrides: Partial<StoreInput> = {}): StoreInput => ({
    status: 200,
    method: 'GET',
    req: {},
    res: { public: true, maxAge: 60, sMaxage: 60 },
    authorized: false,
    hasValidator: true,
    hasExpires: false,
    hasSetCookie: false,
    varyStar: false,
    ...overrides,
  });
  it('stores 200s under max-age, revalidate and ttl, private ones included (credential partitions)', () => {
    for (const kind of ['max-age', 'revalidate', 'ttl'] as const) {
      expect(notStorableReason(policy(kind), input())).toBeNull();
      expect(notStorableReason(policy(kind), input({ authorized: true, res: { private: true, maxAge: 60 } }))).toBeNull();
      expect(notStorableReason(policy(kind), input({ status: 404 }))).toBe('status');
      expect(notStorableReason(policy(kind), input({ status: 403 }))).toBe('status');
      expect(notStorableReason(policy(kind), input({ res: { noStore: true } }))).toBe('no-store');
      expect(notStorableReason(policy(kind), input({ req: { noStore: true } }))).toBe('request-no-store');
      expect(notStorableReason(policy(kind), input({ varyStar: true }))).toBe('vary-star');
      expect(notStorableReason(policy(kind), input({ hasSetCookie: true }))).toBe('set-cookie');
    }
  });
  it('never stores under none', () => {
    expect(notStorableReason(policy('none'), input())).toBe('policy-none');
  });
  it('follows RFC 9111 under rfc9111', () => {
    const rfc9111Policy = policy('rfc9111');
    expect(notStorableReason(rfc9111Policy, input())).toBeNull();
    expect(notStorableReason(rfc9111Policy, input({ res: { private: true, maxAge: 60 } }))).toBe('private');
    expect(notStorableReason(rfc9111Policy, input({ authorized: true, res: { maxAge: 60 } }))).toBe('authorization');
    expect(notStorableReason(rfc9111Policy, input({ authorized: true, res: { public: true } }))).toBeNull();
    expect(notStorableReason(rfc9111Policy, input({ authorized: true, res: { sMaxage: 5 } }))).toBeNull();
    expect(notStorableReason(rfc9111Policy, input({ authorized: true, res: { mustRevalidate: true } }))).toBeNull();
    expect(notStorableReason(rfc9111Policy, input({ status: 404, res: { maxAge: 5 } }))).toBeNull();
    // Any final status with explicit freshness (RFC 9111 section 3); without, only the heuristically cacheable ones.
    expect(notStorableReason(rfc9111Policy, input({ status: 500, res: { maxAge: 5 } }))).toBeNull();
    expect(notStorableReason(rfc9111Policy, input({ status: 500, res: {}, hasValidator: true }))).toBe('status');
    expect(notStorableReason(rfc9111Policy, input({ res: {}, hasValidator: false }))).toBe('no-freshness');
    expect(notStorableReason(policy('rfc9111', { heuristicFraction: 0.1 }), input({ res: {}, hasValidator: false }))).toBeNull();
    expect(notStorableReason(rfc9111Policy, input({ res: {}, hasValidator: true }))).toBeNull();
    expect(notStorableReason(rfc9111Policy, input({ res: {}, hasExpires: true, hasValidator: false }))).toBeNull();
  });
});

describe('freshness lifetime', () => {
  const date = Date.UTC(2026, 0, 1);
  const li = (res: ReturnType<typeof parseCacheControl>, times: { date?: number; expires?: number; lastModified?: number } = {}) => ({
    res,
    date: times.date,
    expires: times.expires,
    lastModified: times.lastModified,
  });
  it('max-age prefers s-maxage, then max-age, then Expires - Date', () => {
    const maxAgePolicy = policy('max-age');
    expect(freshnessLifetime(maxAgePolicy, li({ maxAge: 60, sMaxage: 30 }))).toBe(30);
    expect(freshnessLifetime(maxAgePolicy, li({ maxAge: 60 }))).toBe(60);
    expect(freshnessLifetime(maxAgePolicy, li({}, { date, expires: date + 90_000 }))).toBe(90);
    expect(freshnessLifetime(maxAgePolicy, li({}, { date, expires: date - 5_000 }))).toBe(0);
    expect(freshnessLifetime(maxAgePolicy, li({}))).toBe(0);
  });
  it('max-age applies the configured cap', () => {
    expect(freshnessLifetime(policy('max-age', { maxAgeCap: 10 }), li({ maxAge: 60 }))).toBe(10);
  });
  it('revalidate is never fresh, ttl is fixed', () => {
    expect(freshnessLifetime(policy('revalidate'), li({ maxAge: 60 }))).toBe(0);
    expect(freshnessLifetime(policy('ttl'), li({ maxAge: 600, noCache: true }))).toBe(30);
  });
  it('rfc9111: no-cache means revalidate every time; heuristic only when configured', () => {
    expect(freshnessLifetime(policy('rfc9111'), li({ maxAge: 60, noCache: true }))).toBe(0);
    expect(freshnessLifetime(policy('rfc9111'), li({}, { date, lastModified: date - 100_000 }))).toBe(0);
    expect(freshnessLifetime(policy('rfc9111', { heuristicFraction: 0.1 }), li({}, { date, lastModified: date - 100_000 }))).toBe(10);
  });
});

describe('age and decisions', () => {
  const now = 1_000_000_000_000;
  it('computes the initial age from Date, Age and the round trip (RFC 9111 4.2.3)', () => {
    expect(initialAge(undefined, now, now, now)).toBe(0);
    expect(initialAge(undefined, now - 5000, now, now)).toBe(5);
    expect(initialAge(10, now, now - 2000, now)).toBe(12);
    expect(initialAge(undefined, now + 5000, now, now)).toBe(0);
  });
  const entry = (
    overrides: Partial<{
      initialAge: number;
      storedAt: number;
      lifetime: number;
      staleWhileRevalidate: number;
      mustRevalidate: boolean;
      staleIfError: number;
    }> = {},
  ) => ({
    initialAge: 0,
    storedAt: now,
    lifetime: 60,
    staleWhileRevalidate: 0,
    staleIfError: 100,
    mustRevalidate: false,
    ...overrides,
  });
  it('is fresh within the lifetime', () => {
    expect(decide(entry(), {}, now + 59_000)).toEqual({ kind: 'fresh', age: 59, ttl: 1 });
    expect(currentAge(entry({ initialAge: 3 }), now + 1000)).toBe(4);
  });
  it('revalidates once expired', () => {
    expect(decide(entry(), {}, now + 60_000)).toMatchObject({ kind: 'revalidate', forced: false });
  });
  it('request no-cache and max-age=0 force a revalidation even when fresh', () => {
    expect(decide(entry(), { noCache: true }, now)).toMatchObject({ kind: 'revalidate', forced: true });
    expect(decide(entry(), { maxAge: 0 }, now)).toMatchObject({ kind: 'revalidate', forced: true });
  });
  it('request max-age and min-fresh tighten freshness', () => {
    expect(decide(entry(), { maxAge: 10 }, now + 11_000)).toMatchObject({ kind: 'revalidate', forced: true });
    expect(decide(entry(), { maxAge: 10 }, now + 9_000)).toMatchObject({ kind: 'fresh' });
    expect(decide(entry(), { minFresh: 30 }, now + 40_000)).toMatchObject({ kind: 'revalidate', forced: true });
  });
  it('max-stale and stale-while-revalidate allow stale serving unless must-revalidate', () => {
    expect(decide(entry(), { maxStale: 10 }, now + 65_000)).toMatchObject({ kind: 'stale', background: false });
    expect(decide(entry(), { maxStale: 10 }, now + 75_000)).toMatchObject({ kind: 'revalidate' });
    expect(decide(entry(), { maxStale: Infinity }, now + 1e9)).toMatchObject({ kind: 'stale' });
    expect(decide(entry({ staleWhileRevalidate: 30 }), {}, now + 80_000)).toMatchObject({ kind: 'stale', background: true });
    expect(decide(entry({ staleWhileRevalidate: 30 }), {}, now + 100_000)).toMatchObject({ kind: 'revalidate' });
    expect(decide(entry({ mustRevalidate: true, staleWhileRevalidate: 30 }), { maxStale: 100 }, now + 65_000)).toMatchObject({
      kind: 'revalidate',
    });
  });
  it('stale-if-error has a horizon and respects must-revalidate', () => {
    expect(usableOnError(entry(), now + 150_000)).toBe(true);
    expect(usableOnError(entry(), now + 170_000)).toBe(false);
    expect(usableOnError(entry({ mustRevalidate: true }), now + 61_000)).toBe(false);
    expect(usableOnError(entry({ mustRevalidate: true }), now + 10_000)).toBe(true);
  });
  it('stale windows follow policy and response directives', () => {
    expect(staleWindows(policy('max-age'), {})).toEqual({ staleIfError: 86_400, staleWhileRevalidate: 0, mustRevalidate: false });
    expect(staleWindows(policy('max-age'), { staleIfError: 5 })).toMatchObject({ staleIfError: 5 });
    // Under rfc9111 these directives forbid stale serving; the stale-if-error window is then only how
    // long the entry is kept for a conditional revalidation (decide and usableOnError never serve it).
    for (const res of [{ mustRevalidate: true }, { proxyRevalidate: true }, { sMaxage: 5 }, { noCache: true }] as const) {
      expect(staleWindows(policy('rfc9111'), { ...res, staleWhileRevalidate: 60 })).toEqual({
        staleIfError: 86_400,
        staleWhileRevalidate: 0,
        mustRevalidate: true,
      });
    }
    const forbidden = { ...entry({ lifetime: 60 }), ...staleWindows(policy('rfc9111'), { mustRevalidate: true }) };
    expect(usableOnError(forbidden, now + 61_000)).toBe(false);
    expect(decide(forbidden, { maxStale: Infinity }, now + 61_000)).toMatchObject({ kind: 'revalidate' });
    // GitHub sends s-maxage, but the GitHub policy (max-age) keeps stale-if-error.
    expect(staleWindows(policy('max-age'), { sMaxage: 60 })).toMatchObject({ mustRevalidate: false });
  });
  it('retains entries for freshness plus the longest stale window', () => {
    const kept = { mustRevalidate: false, etag: undefined, lastModified: undefined };
    expect(retentionSeconds({ lifetime: 60, staleIfError: 100, staleWhileRevalidate: 10, initialAge: 0, ...kept })).toBe(160);
    expect(retentionSeconds({ lifetime: 0, staleIfError: 0, staleWhileRevalidate: 0, initialAge: 0, ...kept })).toBe(1);
  });
  it('keeps an entry that may not be served stale past freshness only for its conditional revalidation (RFC 9111 4.3.1)', () => {
    const mustRevalidate = { lifetime: 60, staleIfError: 3600, staleWhileRevalidate: 0, initialAge: 0, mustRevalidate: true };
    expect(retentionSeconds({ ...mustRevalidate, etag: '"a"', lastModified: undefined })).toBe(3660);
    expect(retentionSeconds({ ...mustRevalidate, etag: undefined, lastModified: 'Mon, 01 Jan 2024 00:00:00 GMT' })).toBe(3660);
    // Without a validator a stale copy is of no use: it goes when it stops being fresh.
    expect(retentionSeconds({ ...mustRevalidate, etag: undefined, lastModified: undefined })).toBe(60);
  });
});

describe('304 header merge (RFC 9111 4.3.4)', () => {
  it('updates headers from the 304 but keeps representation metadata', () => {
    const stored: Array<[string, string]> = [
      ['content-type', 'application/json'],
      ['etag', 'W/"a"'],
      ['x-ratelimit-remaining', '10'],
      ['date', 'old'],
      ['set-x', '1'],
    ];
    const fresh: Array<[string, string]> = [
      ['x-ratelimit-remaining', '9'],
      ['date', 'new'],
      ['content-type', 'text/html'],
      ['content-length', '0'],
    ];
    const merged = mergeHeaders(stored, fresh);
    expect(Object.fromEntries(merged)).toEqual({
      'content-type': 'application/json',
      etag: 'W/"a"',
      'x-ratelimit-remaining': '9',
      date: 'new',
      'set-x': '1',
    });
  });
});

describe('corruptBody', () => {
  const json = Buffer.from('{"id":1,"name":"hello"}');
  const cut = Buffer.from('{"id":1,"na');
  it('flags a 2xx labelled JSON (any +json type, any parameters) whose body does not parse', () => {
    for (const type of [
      'application/json',
      'application/json; charset=utf-8',
      'Application/JSON',
      'application/vnd.github+json',
      'application/vnd.github.v3+json',
      'application/problem+json ; x=y',
    ]) {
      expect(corruptBody(200, type, cut), type).toBe(true);
      expect(corruptBody(200, type, json), type).toBe(false);
    }
    expect(corruptBody(203, 'application/json', Buffer.from('{"a":1}<html>'))).toBe(true);
  });
  it('leaves other types, empty bodies and non-2xx answers alone', () => {
    expect(corruptBody(200, 'text/plain', cut)).toBe(false);
    expect(corruptBody(200, 'application/jsonx', cut)).toBe(false);
    // GitHub labels a raw file with the media type asked for: `+json` there is no promise of JSON.
    for (const type of [
      'application/vnd.github.raw+json; charset=utf-8',
      'application/vnd.github.v3.raw+json',
      'application/vnd.github.html+json',
    ])
      expect(corruptBody(200, type, Buffer.from('# hello-world\n')), type).toBe(false);
    expect(corruptBody(200, undefined, cut)).toBe(false);
    expect(corruptBody(204, 'application/json', Buffer.alloc(0))).toBe(false);
    expect(corruptBody(200, 'application/json', Buffer.alloc(0))).toBe(false);
    expect(corruptBody(500, 'application/json', cut)).toBe(false);
    expect(corruptBody(404, 'application/json', cut)).toBe(false);
  });
});
