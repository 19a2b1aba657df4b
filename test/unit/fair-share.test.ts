import { describe, expect, it } from 'vitest';
import {
  decide,
  othersReserves,
  queueBounds,
  reserveOf,
  shareOf,
  standingOf,
  weightOf,
  windowOf,
  type ShareInput,
} from '../../src/pool/rules/fair-share.js';

const NOW = Date.UTC(2030, 0, 1, 10, 20, 0);
const HOUR_END = Date.UTC(2030, 0, 1, 11, 0, 0);
const equal = new Map([
  ['a', 1],
  ['b', 1],
]);
const three = new Map([
  ['a', 1],
  ['b', 1],
  ['c', 2],
]);

function input(over: Partial<ShareInput> & { spentBy?: Record<string, number> }): ShareInput {
  const { spentBy, ...rest } = over;
  return {
    consumer: 'a',
    weights: equal,
    reserveFraction: 0.5,
    quota: 100,
    poolRemaining: 100,
    poolResetMs: undefined,
    spent: new Map(Object.entries(spentBy ?? {})),
    windowEndMs: HOUR_END,
    nowMs: NOW,
    ...rest,
  };
}

describe('shares and reserves', () => {
  it('divides the quota by weight, and reserves a fraction of each share', () => {
    expect(shareOf(equal, 'a', 100)).toBe(50);
    expect(shareOf(three, 'c', 100)).toBe(50);
    expect(shareOf(three, 'a', 100)).toBe(25);
    expect(reserveOf(50, 0.5)).toBe(25);
    expect(reserveOf(50, 0)).toBe(0);
    expect(reserveOf(50, 1)).toBe(50);
    // Hostile or odd input: unknown consumers, no quota, fractions outside [0, 1], bad weights.
    expect(shareOf(equal, 'nobody', 100)).toBe(0);
    expect(shareOf(equal, 'a', 0)).toBe(0);
    expect(shareOf(equal, 'a', -5)).toBe(0);
    expect(reserveOf(50, 7)).toBe(50);
    expect(reserveOf(50, -1)).toBe(0);
    expect([weightOf(undefined), weightOf(0), weightOf(-2), weightOf(Number.NaN), weightOf(Infinity), weightOf(3)]).toEqual([
      1, 1, 1, 1, 1, 3,
    ]);
  });
  it('holds what the other consumers have not spent of their reserves', () => {
    expect(othersReserves(three, 'a', 100, 0.5, new Map())).toBe(12.5 + 25);
    expect(othersReserves(three, 'a', 100, 0.5, new Map([['c', 30]]))).toBe(12.5);
    expect(othersReserves(three, 'a', 100, 0.5, new Map([['a', 99]]))).toBe(37.5);
  });
  it('windows are aligned on the clock: an hour for core, a minute for search', () => {
    expect(windowOf('core', NOW).endMs).toBe(HOUR_END);
    expect(windowOf('search', NOW + 5_000).endMs).toBe(NOW + 60_000);
    expect(windowOf('code_search', NOW).endMs).toBe(NOW + 60_000);
    expect(windowOf('something-new', NOW).endMs).toBe(HOUR_END);
    expect(windowOf('__proto__', NOW).endMs).toBe(HOUR_END);
    expect(windowOf('core', NOW).id).not.toBe(windowOf('core', HOUR_END).id);
  });
});

describe('decide: one more unit for a consumer', () => {
  const cases: Array<[string, Partial<ShareInput> & { spentBy?: Record<string, number> }, ReturnType<typeof decide>]> = [
    ['within its share', { spentBy: { a: 10 } }, { kind: 'admit', borrowing: false }],
    ['the last unit of its share', { spentBy: { a: 49 } }, { kind: 'admit', borrowing: false }],
    ['borrows from an idle consumer', { spentBy: { a: 50 } }, { kind: 'admit', borrowing: true }],
    ['borrows down to the idle one’s reserve, not past it', { spentBy: { a: 74 } }, { kind: 'admit', borrowing: true }],
    ['never into the reserve', { spentBy: { a: 75 } }, { kind: 'refuse', reason: 'share', retryAfterSeconds: 40 * 60 }],
    ['the late consumer finds its reserve', { consumer: 'b', spentBy: { a: 75 } }, { kind: 'admit', borrowing: false }],
    ['and all of it', { consumer: 'b', spentBy: { a: 75, b: 24 } }, { kind: 'admit', borrowing: false }],
    // Once its reserve is spent nothing is held for b any more: the rest is first come, first served.
    ['past the reserves, first come', { spentBy: { a: 75, b: 25 } }, { kind: 'admit', borrowing: true }],
    [
      'the pool is short of its window (tokens spent before the window): reserves still hold',
      { spentBy: { a: 10 }, poolRemaining: 26 },
      { kind: 'admit', borrowing: false },
    ],
    [
      'short tokens: retry at the pool reset when it comes first',
      { spentBy: { a: 10 }, poolRemaining: 25, poolResetMs: NOW + 90_000 },
      { kind: 'refuse', reason: 'share', retryAfterSeconds: 90 },
    ],
    ['numbers unknown: nothing to divide', { spentBy: { a: 500 }, quota: 0 }, { kind: 'admit', borrowing: false }],
    [
      'max_per_hour before anything else',
      { spentBy: { a: 1 }, hourly: { cap: 5, spent: 5, endMs: HOUR_END } },
      { kind: 'refuse', reason: 'max_per_hour', retryAfterSeconds: 2400 },
    ],
    ['max_per_hour not reached', { spentBy: { a: 1 }, hourly: { cap: 5, spent: 4, endMs: HOUR_END } }, { kind: 'admit', borrowing: false }],
    [
      'a cap of 0 refuses everything',
      { hourly: { cap: 0, spent: 0, endMs: HOUR_END } },
      { kind: 'refuse', reason: 'max_per_hour', retryAfterSeconds: 2400 },
    ],
    [
      'Retry-After is at least 1 s',
      { spentBy: { a: 75 }, windowEndMs: NOW + 10 },
      { kind: 'refuse', reason: 'share', retryAfterSeconds: 1 },
    ],
    // Weighted: c (weight 2) has 50 of 100, a and b 25 each, reserves 25, 12.5, 12.5.
    ['weights: a borrows down to b’s and c’s reserves', { weights: three, spentBy: { a: 61 } }, { kind: 'admit', borrowing: true }],
    ['weights: then stops', { weights: three, spentBy: { a: 62 } }, { kind: 'refuse', reason: 'share', retryAfterSeconds: 2400 }],
    [
      'weights: c still finds its reserve',
      { consumer: 'c', weights: three, spentBy: { a: 62, c: 24 } },
      { kind: 'admit', borrowing: false },
    ],
    [
      'weights: c past its reserve, b’s is kept',
      { consumer: 'c', weights: three, spentBy: { a: 62, c: 25 } },
      { kind: 'refuse', reason: 'share', retryAfterSeconds: 2400 },
    ],
    // Hostile: a name that is not configured owns no share and no reserve, and takes nobody's.
    ['an unknown name takes no reserve', { consumer: 'mallory', spentBy: { a: 10 } }, { kind: 'admit', borrowing: true }],
    [
      'an unknown name stops at the reserves',
      { consumer: 'mallory', spentBy: { mallory: 50 } },
      { kind: 'refuse', reason: 'share', retryAfterSeconds: 2400 },
    ],
  ];
  it.each(cases)('%s', (_name, over, expected) => {
    expect(decide(input(over))).toEqual(expected);
  });

  it('a greedy consumer alone never spends the others’ reserves, whatever its order of requests', () => {
    const spent = new Map<string, number>();
    let admitted = 0;
    for (let i = 0; i < 1000; i++) {
      const decision = decide(input({ consumer: 'a', weights: three, spent }));
      if (decision.kind !== 'admit') continue;
      spent.set('a', (spent.get('a') ?? 0) + 1);
      admitted++;
    }
    expect(admitted).toBe(62); // 100 - 12.5 (b) - 25 (c), rounded down
    expect(standingOf(input({ consumer: 'b', weights: three, spent }))).toEqual({ share: 25, reserve: 12.5, spent: 0, available: 13 });
  });
});

describe('queueBounds: pool.max_queue split by weight', () => {
  const weights = new Map([
    ['web', 1],
    ['batch', 2],
  ]);

  it('gives each consumer floor(max_queue x weight / total weight), the unkeyed lane counting as weight 1', () => {
    const bound = queueBounds(100, weights);
    expect([bound('web'), bound('batch'), bound('')]).toEqual([25, 50, 25]);
    // A name that is not configured weighs as the unkeyed lane.
    expect(bound('mallory')).toBe(25);
  });

  it('never leaves a consumer without room to wait, and lets nothing wait when max_queue is 0', () => {
    const tiny = queueBounds(2, new Map([...weights, ['huge', 1000]]));
    expect([tiny('web'), tiny('batch'), tiny('huge'), tiny('')]).toEqual([1, 1, 1, 1]);
    const none = queueBounds(0, weights);
    expect([none('web'), none('batch'), none('')]).toEqual([0, 0, 0]);
  });

  it('without consumers the one unkeyed lane has the whole queue', () => {
    expect(queueBounds(10_000, new Map())('')).toBe(10_000);
  });
});
