import { describe, expect, it } from 'vitest';
import { classify, readRateLimit, retryAfterMs } from '../../src/pool/rules/rate-limit.js';
import { healthOf, poolRateLimit } from '../../src/pool/rules/report.js';
import { mergeObservation, secondaryPauseMs, upstreamConcurrency } from '../../src/pool/rules/state.js';
import type { TokenState } from '../../src/pool/rules/types.js';

const NOW = 1_800_000_000_000;
const nowSeconds = NOW / 1000;
const header = (o: Record<string, string>) => (n: string) => o[n];

describe('rate-limit headers', () => {
  it('reads the x-ratelimit-* set, defaulting the resource to core', () => {
    expect(
      readRateLimit(header({ 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '4999', 'x-ratelimit-reset': String(nowSeconds + 60) })),
    ).toEqual({
      limit: 5000,
      remaining: 4999,
      reset: nowSeconds + 60,
      resource: 'core',
    });
    expect(
      readRateLimit(
        header({ 'x-ratelimit-limit': '30', 'x-ratelimit-remaining': '2', 'x-ratelimit-reset': '9', 'x-ratelimit-resource': 'Search' }),
      )?.resource,
    ).toBe('search');
    expect(
      readRateLimit(header({ 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': 'lots', 'x-ratelimit-reset': '1' })),
    ).toBeUndefined();
    expect(readRateLimit(header({}))).toBeUndefined();
  });

  const table: Array<[string, number, Record<string, string>, string | undefined, ReturnType<typeof classify>]> = [
    ['200 is fine', 200, {}, undefined, { kind: 'ok' }],
    ['304 is fine', 304, {}, undefined, { kind: 'ok' }],
    // A 401 is about the request until GET /rate_limit with the token confirms it.
    ['401 is unauthorized, to confirm', 401, {}, '{"message":"Bad credentials"}', { kind: 'unauthorized' }],
    [
      '403 remaining 0 is exhaustion',
      403,
      { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(nowSeconds + 90) },
      '{"message":"API rate limit exceeded"}',
      { kind: 'exhausted', reset: nowSeconds + 90 },
    ],
    ['429 remaining 0 is exhaustion', 429, { 'x-ratelimit-remaining': '0' }, undefined, { kind: 'exhausted', reset: undefined }],
    [
      '403 with retry-after is secondary',
      403,
      { 'x-ratelimit-remaining': '4000', 'retry-after': '30' },
      undefined,
      { kind: 'secondary', retryAfterMs: 30_000 },
    ],
    [
      'a secondary message wins over remaining 0',
      403,
      { 'x-ratelimit-remaining': '0', 'retry-after': '5' },
      '{"message":"You have exceeded a secondary rate limit."}',
      { kind: 'secondary', retryAfterMs: 5000 },
    ],
    [
      'secondary message without retry-after',
      403,
      { 'x-ratelimit-remaining': '10' },
      '{"message":"You have exceeded a secondary rate limit"}',
      { kind: 'secondary', retryAfterMs: undefined },
    ],
    ['429 without clues backs off', 429, {}, undefined, { kind: 'secondary', retryAfterMs: undefined }],
    [
      'a plain 403 (forbidden) says nothing about the token',
      403,
      { 'x-ratelimit-remaining': '4000' },
      '{"message":"Resource not accessible"}',
      { kind: 'ok' },
    ],
    ['404 is fine', 404, {}, undefined, { kind: 'ok' }],
  ];
  it.each(table)('classify: %s', (_w, status, headers, body, expected) => {
    expect(classify(status, header(headers), body, NOW)).toEqual(expected);
  });

  it('parses Retry-After as seconds or an HTTP date', () => {
    expect(retryAfterMs('120', NOW)).toBe(120_000);
    expect(retryAfterMs(new Date(NOW + 30_000).toUTCString(), NOW)).toBe(30_000);
    expect(retryAfterMs('soon', NOW)).toBeUndefined();
    expect(retryAfterMs(undefined, NOW)).toBeUndefined();
  });
});

describe('token state updates', () => {
  const current = { limit: 5000, remaining: 100, reset: nowSeconds + 60 };
  it('keeps the lowest remaining within a window (answers arrive out of order)', () => {
    expect(mergeObservation(current, { limit: 5000, remaining: 120, reset: nowSeconds + 60, resource: 'core' }, true)).toEqual({
      limit: 5000,
      remaining: 100,
      reset: nowSeconds + 60,
    });
    expect(mergeObservation(current, { limit: 5000, remaining: 90, reset: nowSeconds + 60, resource: 'core' }, true)).toEqual({
      limit: 5000,
      remaining: 90,
      reset: nowSeconds + 60,
    });
  });
  it('a later reset starts a new window; an earlier one is a late answer', () => {
    expect(mergeObservation(current, { limit: 5000, remaining: 4999, reset: nowSeconds + 3660, resource: 'core' }, true)).toEqual({
      limit: 5000,
      remaining: 4999,
      reset: nowSeconds + 3660,
    });
    expect(mergeObservation(current, { limit: 5000, remaining: 3, reset: nowSeconds - 10, resource: 'core' }, true)).toEqual(current);
  });
  it('takes the first observation of an unknown token as it is, and ignores other resources', () => {
    expect(
      mergeObservation({ limit: 1, remaining: 1, reset: 0 }, { limit: 50, remaining: 50, reset: nowSeconds + 9, resource: 'core' }, false),
    ).toEqual({ limit: 50, remaining: 50, reset: nowSeconds + 9 });
    expect(mergeObservation(current, { limit: 30, remaining: 0, reset: nowSeconds + 9, resource: 'search' }, true)).toEqual(current);
  });
  it('pauses after a secondary limit: Retry-After, else 60 s doubling, capped at an hour', () => {
    expect(secondaryPauseMs(30_000, 1)).toBe(30_000);
    expect(secondaryPauseMs(0, 1)).toBe(1000);
    expect([1, 2, 3, 4].map((n) => secondaryPauseMs(undefined, n))).toEqual([60_000, 120_000, 240_000, 480_000]);
    expect(secondaryPauseMs(undefined, 30)).toBe(3_600_000);
  });
  it('slows the whole upstream when several tokens hit secondary limits within a minute', () => {
    expect(upstreamConcurrency(90, [], NOW)).toBe(90);
    expect(
      upstreamConcurrency(
        90,
        [
          { at: NOW - 1000, token: 'a' },
          { at: NOW - 500, token: 'a' },
        ],
        NOW,
      ),
    ).toBe(90);
    expect(
      upstreamConcurrency(
        90,
        [
          { at: NOW - 1000, token: 'a' },
          { at: NOW - 500, token: 'b' },
        ],
        NOW,
      ),
    ).toBe(22);
    expect(
      upstreamConcurrency(
        90,
        [
          { at: NOW - 61_000, token: 'a' },
          { at: NOW - 500, token: 'b' },
        ],
        NOW,
      ),
    ).toBe(90);
    expect(
      upstreamConcurrency(
        2,
        [
          { at: NOW, token: 'a' },
          { at: NOW, token: 'b' },
        ],
        NOW,
      ),
    ).toBe(1);
  });
});

describe('the pool as one quota', () => {
  const tok = (name: string, overrides: Partial<TokenState>): TokenState => ({
    name,
    limit: 50,
    remaining: 50,
    reset: nowSeconds + 60,
    inFlight: 0,
    dead: false,
    pausedUntil: 0,
    ...overrides,
  });
  it('sums limits and remaining of live tokens, with the earliest reset', () => {
    const rl = poolRateLimit(
      [
        tok('a', { remaining: 10, reset: nowSeconds + 30 }),
        tok('b', { remaining: 40 }),
        tok('d', { dead: true, remaining: 50, reset: nowSeconds + 1 }),
      ],
      NOW,
    );
    expect(rl).toEqual({ limit: 100, remaining: 50, used: 50, reset: nowSeconds + 30 });
    expect(rl.limit).toBe(rl.remaining + rl.used);
  });
  it('counts a renewed window as full', () => {
    expect(poolRateLimit([tok('a', { remaining: 0, reset: nowSeconds - 10 })], NOW)).toMatchObject({ limit: 50, remaining: 50, used: 0 });
  });
  it('names each state', () => {
    expect(healthOf(tok('a', {}), NOW)).toBe('ok');
    expect(healthOf(tok('a', { remaining: 0 }), NOW)).toBe('exhausted');
    expect(healthOf(tok('a', { pausedUntil: NOW + 1 }), NOW)).toBe('paused');
    expect(healthOf(tok('a', { dead: true }), NOW)).toBe('dead');
  });
});
