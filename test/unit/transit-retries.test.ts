import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Retries,
  type RetryOutcome,
  BACKOFF_MAX_MS,
  BACKOFF_MIN_MS,
  RETRY_BUDGET,
  backoffMs,
  budgetAllows,
  countRequest,
  countRetry,
  emptyBudget,
  rolled,
  transitOfError,
  transitOfStatus,
  type TransitReason,
} from '../../src/upstream/retries.js';

describe('which upstream failures are retried', () => {
  it.each([
    ['ECONNRESET', 'reset'],
    ['UND_ERR_SOCKET', 'reset'],
    ['EPIPE', 'reset'],
    ['ECONNREFUSED', 'refused'],
    ['UND_ERR_CONNECT_TIMEOUT', 'timeout'],
    ['UND_ERR_HEADERS_TIMEOUT', 'timeout'],
    ['ETIMEDOUT', 'timeout'],
  ])('a connection that fails before any byte (%s) is retried as %s', (code, reason) => {
    expect(transitOfError(code)).toBe(reason);
  });

  it.each([
    'UND_ERR_BODY_TIMEOUT',
    'UND_ERR_ABORTED',
    'UND_ERR_DESTROYED',
    'UND_ERR_CLOSED',
    'ENOTFOUND',
    'error',
    'toString',
    '__proto__',
  ])('an error after bytes came, or not about transit (%s), is not retried', (code) => {
    expect(transitOfError(code)).toBeUndefined();
  });

  it('502, 503 and 504 without Retry-After are retried; with it, or any other status, not', () => {
    expect(transitOfStatus(502, {})).toBe('status_502');
    expect(transitOfStatus(503, { 'cache-control': 'no-cache' })).toBe('status_503');
    expect(transitOfStatus(504, {})).toBe('status_504');
    expect(transitOfStatus(503, { 'retry-after': '30' })).toBeUndefined();
    expect(transitOfStatus(502, { 'retry-after': ['1'] })).toBeUndefined();
    for (const status of [200, 304, 401, 403, 404, 429, 500, 501, 505]) expect(transitOfStatus(status, {})).toBeUndefined();
  });

  it('a 5xx with explicit freshness is a deliberate answer, not retried', () => {
    expect(transitOfStatus(503, { 'cache-control': 'max-age=3600' })).toBeUndefined();
    expect(transitOfStatus(503, { 'cache-control': 'public, S-MaxAge=60' })).toBeUndefined();
    expect(transitOfStatus(502, { expires: 'Thu, 01 Jan 2099 00:00:00 GMT' })).toBeUndefined();
  });
});

describe('backoff before a retry', () => {
  it('is always within 50-250 ms, whatever the random draw', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: false }), (draw) => {
        const ms = backoffMs(draw);
        return ms >= BACKOFF_MIN_MS && ms < BACKOFF_MAX_MS;
      }),
    );
    expect(backoffMs(0)).toBe(BACKOFF_MIN_MS);
    expect(backoffMs(0.999)).toBeGreaterThan(240);
  });
});

describe('retry budget', () => {
  const fill = (requests: number, retries: number, now = 0) => {
    let state = emptyBudget(now);
    for (let i = 0; i < requests; i++) state = countRequest(state);
    for (let i = 0; i < retries; i++) state = countRetry(countRequest(state));
    return state;
  };

  it('allows a few retries even with little traffic', () => {
    expect(budgetAllows(fill(0, 0), 0)).toBe(true);
    expect(budgetAllows(fill(1, RETRY_BUDGET.minRetries - 1), 0)).toBe(true);
    expect(budgetAllows(fill(1, RETRY_BUDGET.minRetries), 0)).toBe(false);
  });

  it('keeps retries to a tenth of first attempts under load', () => {
    fc.assert(
      fc.property(fc.integer({ min: 40, max: 5000 }), (requests) => {
        let state = fill(requests, 0);
        let retries = 0;
        while (budgetAllows(state, 0)) {
          state = countRetry(countRequest(state));
          retries++;
        }
        return retries === Math.floor(requests * RETRY_BUDGET.ratio);
      }),
    );
  });

  it('forgets the past: half a window on, the last window counts half; two windows on, nothing', () => {
    const windowMs = RETRY_BUDGET.windowMs;
    const full = fill(100, 10); // the budget is spent
    expect(budgetAllows(full, 0)).toBe(false);
    const later = rolled(full, windowMs * 1.5);
    expect(later).toMatchObject({ requests: 0, retries: 0, prevRequests: 110, prevRetries: 10 });
    // Weighted by the overlap: 50 first attempts and 5 retries in the window: the minimum of 3 is spent, 10 % of 50 too.
    expect(budgetAllows(later, windowMs * 1.5)).toBe(false);
    expect(rolled(full, 3 * windowMs)).toEqual(emptyBudget(3 * windowMs));
    expect(budgetAllows(rolled(full, 3 * windowMs), 3 * windowMs)).toBe(true);
  });
});

describe('retry decisions of an upstream client', () => {
  const make = (max: number) => {
    const seen: Array<[TransitReason, RetryOutcome]> = [];
    const retries = new Retries(
      max,
      (reason, outcome) => seen.push([reason, outcome]),
      () => 0,
      () => 0.5,
    );
    return { retries, seen };
  };

  it('retries a GET or HEAD once by default, and never a POST', () => {
    const { retries, seen } = make(1);
    expect(retries.decide('GET', 0, 'reset')).toEqual({ kind: 'retry', delayMs: 150 });
    expect(retries.decide('GET', 1, 'reset')).toEqual({ kind: 'stop' });
    expect(retries.decide('HEAD', 0, 'status_503')).toMatchObject({ kind: 'retry' });
    expect(retries.decide('POST', 0, 'reset')).toEqual({ kind: 'stop' });
    expect(retries.decide('GET', 0, undefined)).toEqual({ kind: 'stop' });
    expect(seen).toEqual([
      ['reset', 'retried'],
      ['status_503', 'retried'],
    ]);
  });

  it('retries: 0 never retries', () => {
    const { retries, seen } = make(0);
    expect(retries.decide('GET', 0, 'refused')).toEqual({ kind: 'stop' });
    expect(seen).toEqual([]);
  });

  it('a reset storm spends the budget, then failures go back at once and are counted as budget_exhausted', () => {
    const { retries, seen } = make(1);
    let sentAgain = 0;
    for (let i = 0; i < 1000; i++) {
      retries.sent();
      if (retries.decide('GET', 0, 'reset').kind === 'retry') {
        retries.sent();
        sentAgain++;
      }
    }
    expect(sentAgain).toBeLessThanOrEqual(100);
    expect(sentAgain).toBeGreaterThanOrEqual(90);
    expect(seen.filter(([, o]) => o === 'budget_exhausted')).toHaveLength(1000 - sentAgain);
  });
});
