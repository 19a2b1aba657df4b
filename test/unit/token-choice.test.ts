import { describe, expect, it } from 'vitest';
import { chooseToken, earliestRetry, score, type Choice } from '../../src/pool/rules/choose.js';
import { RESET_GRACE_MS, available } from '../../src/pool/rules/state.js';
import type { TokenState } from '../../src/pool/rules/types.js';

const NOW = 1_800_000_000_000; // epoch ms
const nowSeconds = NOW / 1000;
const tok = (name: string, overrides: Partial<TokenState> = {}): TokenState => ({
  name,
  limit: 5000,
  remaining: 1000,
  reset: nowSeconds + 3600,
  inFlight: 0,
  dead: false,
  pausedUntil: 0,
  ...overrides,
});
const choose = (tokens: TokenState[], prefer?: string, maxInFlight = 10, exclude?: string[]) =>
  chooseToken({ tokens, now: NOW, maxInFlight, prefer, exclude: exclude === undefined ? undefined : new Set(exclude) });

describe('token choice', () => {
  // A table of pool states and the expected pick.
  const table: Array<[string, TokenState[], string | undefined, Choice]> = [
    [
      'most quota left wins',
      [tok('a', { remaining: 100 }), tok('b', { remaining: 900 }), tok('c', { remaining: 500 })],
      undefined,
      { kind: 'token', name: 'b', switched: false },
    ],
    [
      'reservations count against quota',
      [tok('a', { remaining: 100 }), tok('b', { remaining: 105, inFlight: 9 })],
      undefined,
      { kind: 'token', name: 'a', switched: false },
    ],
    // 200 left resetting in 2 min (1.67/s) beats 4000 left resetting in 59 min (1.13/s).
    [
      'a token about to reset may spend faster',
      [tok('slow', { remaining: 4000, reset: nowSeconds + 59 * 60 }), tok('soon', { remaining: 200, reset: nowSeconds + 120 })],
      undefined,
      { kind: 'token', name: 'soon', switched: false },
    ],
    [
      'same rate: the later reset is no better',
      [tok('x', { remaining: 600, reset: nowSeconds + 600 }), tok('y', { remaining: 60, reset: nowSeconds + 60 })],
      undefined,
      { kind: 'token', name: 'x', switched: false },
    ],
    ['ties go to the lower name', [tok('b'), tok('a'), tok('c')], undefined, { kind: 'token', name: 'a', switched: false }],
    [
      'a renewed window counts as full',
      [tok('a', { remaining: 4000 }), tok('r', { remaining: 0, reset: nowSeconds - 5 })],
      undefined,
      { kind: 'token', name: 'r', switched: false },
    ],
    [
      'reset within the grace is not renewed yet',
      [tok('r', { remaining: 0, reset: nowSeconds }), tok('a', { remaining: 1 })],
      undefined,
      { kind: 'token', name: 'a', switched: false },
    ],
    [
      'dead, paused, spent and saturated tokens are skipped',
      [
        tok('dead', { dead: true, remaining: 5000 }),
        tok('paused', { pausedUntil: NOW + 1000, remaining: 5000 }),
        tok('empty', { remaining: 0 }),
        tok('busy', { inFlight: 10, remaining: 5000 }),
        tok('ok', { remaining: 10 }),
      ],
      undefined,
      { kind: 'token', name: 'ok', switched: false },
    ],
    ['a pause that ended is over', [tok('p', { pausedUntil: NOW })], undefined, { kind: 'token', name: 'p', switched: false }],
    [
      'a revalidation keeps the storing token while usable',
      [tok('a', { remaining: 5 }), tok('b', { remaining: 5000 })],
      'a',
      { kind: 'token', name: 'a', switched: false },
    ],
    ['storing token dead: switch', [tok('a', { dead: true }), tok('b')], 'a', { kind: 'token', name: 'b', switched: true }],
    ['storing token paused: switch', [tok('a', { pausedUntil: NOW + 5 }), tok('b')], 'a', { kind: 'token', name: 'b', switched: true }],
    ['storing token spent: switch', [tok('a', { remaining: 0 }), tok('b')], 'a', { kind: 'token', name: 'b', switched: true }],
    ['storing token at its cap: switch', [tok('a', { inFlight: 10 }), tok('b')], 'a', { kind: 'token', name: 'b', switched: true }],
    ['storing token gone from the pool: no switch to count', [tok('b')], 'gone', { kind: 'token', name: 'b', switched: false }],
    ['all at their cap: wait', [tok('a', { inFlight: 10 }), tok('b', { inFlight: 10 })], undefined, { kind: 'wait' }],
    [
      'last units reserved: wait for them to come back',
      [tok('a', { remaining: 2, inFlight: 2 }), tok('b', { remaining: 0 })],
      undefined,
      { kind: 'wait' },
    ],
    [
      'spent, paused, dead: none, with the earliest return',
      [tok('a', { remaining: 0, reset: nowSeconds + 300 }), tok('b', { pausedUntil: NOW + 60_000 }), tok('d', { dead: true })],
      undefined,
      { kind: 'none', retryAt: NOW + 60_000 },
    ],
    ['all dead: none, never', [tok('d', { dead: true })], undefined, { kind: 'none', retryAt: undefined }],
    ['empty pool: none', [], undefined, { kind: 'none', retryAt: undefined }],
  ];
  it.each(table)('%s', (_what, tokens, prefer, expected) => {
    expect(choose(tokens, prefer)).toEqual(expected);
  });

  it('a retry never goes back to a token it tried', () => {
    expect(choose([tok('a', { remaining: 5000 }), tok('b', { remaining: 10 })], undefined, 10, ['a'])).toEqual({
      kind: 'token',
      name: 'b',
      switched: false,
    });
    expect(choose([tok('a', { remaining: 5000 })], 'a', 10, ['a'])).toEqual({ kind: 'none', retryAt: NOW });
    // Tried and spent, the other dead: the answer still says when the tried one comes back.
    expect(choose([tok('a', { remaining: 0, reset: nowSeconds + 30 }), tok('d', { dead: true })], undefined, 10, ['a'])).toEqual({
      kind: 'none',
      retryAt: NOW + 30_000 + RESET_GRACE_MS,
    });
  });

  it('scores quota left per second until reset', () => {
    expect(score(tok('x', { remaining: 120, reset: nowSeconds + 60 }), NOW)).toBeCloseTo(2);
    expect(score(tok('x', { remaining: 120, reset: nowSeconds + 60, inFlight: 60 }), NOW)).toBeCloseTo(1);
    expect(available(tok('r', { remaining: 0, limit: 50, reset: nowSeconds - 2 }), NOW)).toBe(50);
  });

  it('reports when the pool can take a request again', () => {
    expect(earliestRetry([tok('a', { remaining: 0, reset: nowSeconds + 300 })], NOW)).toBe(NOW + 300_000 + RESET_GRACE_MS);
    expect(earliestRetry([tok('a', { remaining: 0, reset: nowSeconds + 300, pausedUntil: NOW + 400_000 })], NOW)).toBe(NOW + 400_000);
    expect(earliestRetry([tok('busy', { inFlight: 10 })], NOW)).toBe(NOW);
  });

  it('never hands out more than the remaining quota across reservations', () => {
    let state = tok('a', { remaining: 3 });
    let handed = 0;
    for (let i = 0; i < 10; i++) {
      const choice = choose([state], undefined, 100);
      if (choice.kind !== 'token') {
        expect(choice.kind).toBe('wait');
        break;
      }
      handed++;
      state = { ...state, inFlight: state.inFlight + 1 };
    }
    expect(handed).toBe(3);
  });

  it('spreads a fresh pool across its tokens as reservations accumulate', () => {
    let tokens = [tok('a', { remaining: 50 }), tok('b', { remaining: 50 }), tok('c', { remaining: 50 })];
    const picks: string[] = [];
    for (let i = 0; i < 6; i++) {
      const choice = choose(tokens, undefined, 100);
      if (choice.kind !== 'token') throw new Error('no token');
      picks.push(choice.name);
      tokens = tokens.map((t) => (t.name === choice.name ? { ...t, inFlight: t.inFlight + 1 } : t));
    }
    expect(picks).toEqual(['a', 'b', 'c', 'a', 'b', 'c']);
  });
});
