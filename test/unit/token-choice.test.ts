import { describe, expect, it } from 'vitest';
import { available, chooseToken, earliestRetry, score, type TokenState } from '../../src/tokens/choose.js';

const NOW = 1_800_000_000_000; // epoch ms
const s = NOW / 1000;
const tok = (name: string, o: Partial<TokenState> = {}): TokenState => ({
  name,
  remaining: 1000,
  reset: s + 3600,
  inFlight: 0,
  dead: false,
  pausedUntil: 0,
  ...o,
});
const choose = (tokens: TokenState[], prefer?: string, maxInFlight = 10) => chooseToken({ tokens, now: NOW, maxInFlight, prefer });

describe('token choice', () => {
  it('takes the token with the most quota left after reservations', () => {
    expect(choose([tok('a', { remaining: 100 }), tok('b', { remaining: 900 }), tok('c', { remaining: 500 })])).toEqual({ kind: 'token', name: 'b', switched: false });
    expect(choose([tok('a', { remaining: 100 }), tok('b', { remaining: 105, inFlight: 9 })])).toMatchObject({ name: 'a' });
  });
  it('weights by time to reset: a token about to reset may spend faster', () => {
    // 200 left resetting in 2 min (1.67/s) beats 4000 left resetting in 59 min (1.13/s).
    expect(choose([tok('slow', { remaining: 4000, reset: s + 59 * 60 }), tok('soon', { remaining: 200, reset: s + 120 })])).toMatchObject({ name: 'soon' });
    expect(score(tok('x', { remaining: 120, reset: s + 60 }), NOW)).toBeCloseTo(2);
  });
  it('treats a token whose window has passed as refilled', () => {
    expect(available(tok('r', { remaining: 0, reset: s - 1 }), NOW)).toBe(Infinity);
    expect(choose([tok('a', { remaining: 4000 }), tok('r', { remaining: 0, reset: s - 1 })])).toMatchObject({ name: 'r' });
  });
  it('skips dead, paused, exhausted and saturated tokens', () => {
    const tokens = [
      tok('dead', { dead: true, remaining: 5000 }),
      tok('paused', { pausedUntil: NOW + 1000, remaining: 5000 }),
      tok('empty', { remaining: 0 }),
      tok('reserved', { remaining: 3, inFlight: 3 }),
      tok('busy', { inFlight: 10, remaining: 5000 }),
      tok('ok', { remaining: 10 }),
    ];
    expect(choose(tokens)).toEqual({ kind: 'token', name: 'ok', switched: false });
    expect(choose([tok('p', { pausedUntil: NOW })])).toMatchObject({ name: 'p' });
  });
  it('is deterministic on ties', () => {
    expect(choose([tok('b'), tok('a'), tok('c')])).toMatchObject({ name: 'a' });
  });
  it('a revalidation keeps the token that stored the entry while it is usable', () => {
    expect(choose([tok('a', { remaining: 5 }), tok('b', { remaining: 5000 })], 'a')).toEqual({ kind: 'token', name: 'a', switched: false });
  });
  it('switches token for a revalidation only when the preferred one cannot be used, and says so', () => {
    for (const bad of [{ dead: true }, { pausedUntil: NOW + 5 }, { remaining: 0 }, { inFlight: 10 }]) {
      expect(choose([tok('a', bad), tok('b')], 'a')).toEqual({ kind: 'token', name: 'b', switched: true });
    }
    // A preferred token that is not in the pool (e.g. removed) is no switch to count.
    expect(choose([tok('b')], 'gone')).toEqual({ kind: 'token', name: 'b', switched: false });
  });
  it('reports when the pool can take a request again', () => {
    const tokens = [tok('a', { remaining: 0, reset: s + 300 }), tok('b', { pausedUntil: NOW + 60_000 }), tok('d', { dead: true })];
    expect(choose(tokens)).toEqual({ kind: 'none', retryAt: NOW + 60_000 });
    expect(earliestRetry([tok('a', { remaining: 0, reset: s + 300 })], NOW)).toBe(NOW + 300_000);
    expect(earliestRetry([tok('a', { remaining: 0, reset: s + 300, pausedUntil: NOW + 400_000 })], NOW)).toBe(NOW + 400_000);
    expect(earliestRetry([tok('busy', { inFlight: 10 })], NOW)).toBe(NOW);
    expect(choose([tok('d', { dead: true })])).toEqual({ kind: 'none', retryAt: undefined });
    expect(choose([])).toEqual({ kind: 'none', retryAt: undefined });
  });
  it('never hands out more than the remaining quota across reservations', () => {
    const t = tok('a', { remaining: 3 });
    let state = t;
    let handed = 0;
    for (let i = 0; i < 10; i++) {
      const c = choose([state], undefined, 100);
      if (c.kind !== 'token') break;
      handed++;
      state = { ...state, inFlight: state.inFlight + 1 };
    }
    expect(handed).toBe(3);
  });
});
