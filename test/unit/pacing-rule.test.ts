import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  burstBudget,
  BURST_WINDOW_MS,
  MINUTE_WINDOW_MS,
  paceReadyAt,
  pointsOf,
  pruneLog,
  type PaceEntry,
} from '../../src/pool/rules/choose.js';

/** The most points sent in any window of `windowMs` (a window's sum is largest when it ends at a send). */
function heaviest(log: readonly PaceEntry[], windowMs: number): number {
  let most = 0;
  for (const end of log) {
    let sum = 0;
    for (const entry of log) if (entry.at > end.at - windowMs && entry.at <= end.at) sum += entry.points;
    most = Math.max(most, sum);
  }
  return most;
}

/** Sends every request whose points fit when it arrives (a request that does not fit is dropped). */
function run(budget: number, arrivals: ReadonlyArray<{ gap: number; points: number; background: boolean }>): PaceEntry[] {
  const sent: PaceEntry[] = [];
  let log: PaceEntry[] = [];
  let at = 1_000_000;
  for (const arrival of arrivals) {
    at += arrival.gap;
    if (paceReadyAt(log, arrival.points, budget, at, arrival.background) !== at) continue;
    log = pruneLog(log, at);
    log.push({ at, points: arrival.points });
    sent.push({ at, points: arrival.points });
  }
  return sent;
}

describe('secondary-limit points (pacing rule)', () => {
  it("costs requests by GitHub's table: reads 1 point, writes and mutations 5", () => {
    expect(['GET', 'HEAD', 'OPTIONS', 'get'].map((method) => pointsOf(method))).toEqual([1, 1, 1, 1]);
    expect(['POST', 'PATCH', 'PUT', 'DELETE'].map((method) => pointsOf(method))).toEqual([5, 5, 5, 5]);
    expect(pointsOf('POST', { mutation: false })).toBe(1); // a GraphQL query
    expect(pointsOf('POST', { mutation: true })).toBe(5);
  });

  it('never lets a token send more than its budget in any minute, nor more than a sixth plus one in any 10 s', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 24, max: 3000 }),
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 2_000 }), points: fc.constantFrom(1, 1, 1, 5), background: fc.boolean() }), {
          maxLength: 600,
        }),
        (budget, arrivals) => {
          const sent = run(budget, arrivals);
          expect(heaviest(sent, MINUTE_WINDOW_MS)).toBeLessThanOrEqual(budget);
          expect(heaviest(sent, BURST_WINDOW_MS)).toBeLessThanOrEqual(budget / 6 + 1);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('says exactly when points are back: they fit then, and not a millisecond before', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 24, max: 1200 }),
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 500 }), points: fc.constantFrom(1, 5), background: fc.constant(false) }), {
          minLength: 1,
          maxLength: 400,
        }),
        fc.constantFrom(1, 5),
        (budget, arrivals, points) => {
          const sent = run(budget, arrivals);
          const now = (sent.at(-1)?.at ?? 0) + 1;
          const ready = paceReadyAt(sent, points, budget, now);
          expect(paceReadyAt(sent, points, budget, ready)).toBe(ready);
          if (ready > now) expect(paceReadyAt(sent, points, budget, ready - 1)).toBeGreaterThan(ready - 1);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('lets steady load reach the whole budget: every minute of a saturating run carries at least 95 % of it', () => {
    for (const budget of [60, 900, 2000]) {
      let log: PaceEntry[] = [];
      const sent: PaceEntry[] = [];
      const start = 5_000_000;
      for (let at = start; at < start + 5 * MINUTE_WINDOW_MS;) {
        const ready = paceReadyAt(log, 1, budget, at);
        if (ready > at) {
          at = ready;
          continue;
        }
        log = pruneLog(log, at);
        log.push({ at, points: 1 });
        sent.push({ at, points: 1 });
      }
      for (let minute = 1; minute < 5; minute++) {
        const from = start + minute * MINUTE_WINDOW_MS;
        const inMinute = sent.filter((entry) => entry.at >= from && entry.at < from + MINUTE_WINDOW_MS).length;
        expect(inMinute, `budget ${budget}, minute ${minute}`).toBeGreaterThanOrEqual(0.95 * budget);
        expect(inMinute).toBeLessThanOrEqual(budget);
      }
      expect(heaviest(sent, BURST_WINDOW_MS)).toBe(burstBudget(budget));
    }
  });

  it('keeps a reserve from background work: it stops a tenth short of each window', () => {
    const budget = 600; // 101 in 10 s, of which background may take 91
    let log: PaceEntry[] = [];
    let taken = 0;
    while (paceReadyAt(log, 1, budget, 1_000, true) === 1_000) {
      log = [...log, { at: 1_000, points: 1 }];
      taken++;
    }
    expect(taken).toBe(91);
    expect(paceReadyAt(log, 1, budget, 1_000)).toBe(1_000); // a client still goes
  });
});
