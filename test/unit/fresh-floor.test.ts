import { describe, expect, it } from 'vitest';
import { computeFreshnessFloor, type FreshnessFloorSchedule } from '../../bench/fresh-floor.js';
import { computeFloor, makeSchedule, SCENARIO_IDS } from '../../bench/quota.js';
import { mulberry32 } from '../../bench/zipf.js';

/** One consumer reading one rank a minute: read m happens at 60 m simulated seconds. */
function everyMinute(ranks: number[], changedAfter: number[][] = []): FreshnessFloorSchedule {
  return { requests: ranks.map((rank) => [[rank]]), mutations: ranks.map((_, minute) => changedAfter[minute] ?? []) };
}

describe('freshness floor (bench/fresh-floor.ts)', () => {
  it('revalidates an unchanged repository once its last fetch is more than F old; a read exactly F after it is still covered', () => {
    // Reads at 0, 60, ..., 540 s; F = 120 s: fetches at 0 (first), 180, 360, 540 (304s).
    const floor = computeFreshnessFloor(everyMinute(Array<number>(10).fill(1)), 120);
    expect(floor).toEqual({ freshSeconds: 120, initial: 1, changesSeen: 0, expired: 3, total: 4 });
  });

  it('fetches at the first read after a change, however fresh its copy; changes nobody read in between count once', () => {
    // Rank 1 read at minutes 0, 1, 4, 5 and changed after minutes 1, 2 and 3; rank 2 read at 2 and 3. F covers the run.
    const floor = computeFreshnessFloor(everyMinute([1, 1, 2, 2, 1, 1], [[], [1], [1], [1]]), 3600);
    expect(floor).toEqual({ freshSeconds: 3600, initial: 2, changesSeen: 1, expired: 0, total: 3 });
    // A change restarts the F window: reads at 0, 60, 120, 180 s with F = 120 s take a revalidation at 180 unchanged,
    // but after a change the fetch at 60 covers 180.
    expect(computeFreshnessFloor(everyMinute([1, 1, 1, 1]), 120)).toMatchObject({ expired: 1, total: 2 });
    expect(computeFreshnessFloor(everyMinute([1, 1, 1, 1], [[1]]), 120)).toEqual({
      freshSeconds: 120,
      initial: 1,
      changesSeen: 1,
      expired: 0,
      total: 2,
    });
  });

  it('places reads in time within a minute as the quota bench sends them (request j of consumer c at (j + c / C) / R minute)', () => {
    // 2 consumers x 2 requests: ticks of 15 s. Consumer 1 reads rank 1 at 15 s; consumer 0 reads it at 60 s and 90 s.
    const schedule: FreshnessFloorSchedule = {
      requests: [
        [
          [2, 2],
          [1, 2],
        ],
        [
          [1, 1],
          [2, 2],
        ],
      ],
      mutations: [[], []],
    };
    // F = 60 s. Rank 1 at 15, 60, 90 s: 60 is 45 s after the fetch at 15 (covered), 90 is 75 s after it (a revalidation).
    // Rank 2 at 0, 30, 45, 75, 105 s: 30 and 45 are covered, 75 is not, and the revalidation at 75 covers 105.
    expect(computeFreshnessFloor(schedule, 60)).toEqual({ freshSeconds: 60, initial: 2, changesSeen: 0, expired: 2, total: 4 });
    // F = 30 s: rank 2's 45 s read is 45 s after its fetch; 75 s, 30 s after that, is covered again; 105 is not.
    expect(computeFreshnessFloor(schedule, 30)).toEqual({ freshSeconds: 30, initial: 2, changesSeen: 0, expired: 3, total: 5 });
  });

  it('is the quota floor when F outlasts the run, every read when F is 0, and never grows with F', () => {
    const settings = {
      minutes: 6,
      consumers: 5,
      resources: 50,
      changesPerMinute: 3,
      rate: 8,
      minuteMs: 1000,
      exponent: 1,
      webhookFreshSeconds: 600,
      seed: 7,
      scenarios: SCENARIO_IDS,
    };
    const schedule = makeSchedule(settings);
    const quotaFloor = computeFloor(schedule, settings.resources);
    const endless = computeFreshnessFloor(schedule, 6 * 60);
    expect([endless.initial, endless.changesSeen, endless.expired]).toEqual([quotaFloor.initial, quotaFloor.changesSeen, 0]);
    expect(computeFreshnessFloor(schedule, 0).total).toBe(6 * 5 * 8);
    let previous = Number.POSITIVE_INFINITY;
    for (const seconds of [0, 10, 30, 60, 90, 120, 240, 360]) {
      const floor = computeFreshnessFloor(schedule, seconds);
      expect(floor.total).toBeLessThanOrEqual(previous);
      expect(floor.initial + floor.changesSeen).toBe(quotaFloor.total);
      previous = floor.total;
    }
  });

  it('is the minimum: no choice of fetches at read times that honours F and every change does better (exhaustive, small cases)', () => {
    const random = mulberry32(18);
    for (let round = 0; round < 200; round++) {
      const minutes = 2 + Math.floor(random() * 9);
      const ranks = Array.from({ length: minutes }, () => (random() < 0.7 ? 1 : 2));
      const changes = Array.from({ length: minutes }, () => (random() < 0.25 ? [1] : []));
      const fresh = 60 * Math.floor(random() * 4);
      expect(computeFreshnessFloor(everyMinute(ranks, changes), fresh).total).toBe(bruteForce(ranks, changes, fresh));
    }
  });
});

/** The fewest fetches, tried over every subset of reads, such that each read is served by the latest fetch of its rank, of its version, at most F before it. */
function bruteForce(ranks: number[], changes: number[][], fresh: number): number {
  const versions: number[] = [];
  const version = new Map<number, number>();
  ranks.forEach((rank, minute) => {
    versions.push(version.get(rank) ?? 0);
    for (const changed of changes[minute] ?? []) version.set(changed, (version.get(changed) ?? 0) + 1);
  });
  let best = Number.POSITIVE_INFINITY;
  for (let mask = 0; mask < 1 << ranks.length; mask++) {
    const last = new Map<number, number>();
    let ok = true;
    ranks.forEach((rank, minute) => {
      if ((mask & (1 << minute)) !== 0) last.set(rank, minute);
      const at = last.get(rank);
      if (at === undefined || versions[at] !== versions[minute] || (minute - at) * 60 > fresh) ok = false;
    });
    if (ok) best = Math.min(best, popcount(mask));
  }
  return best;
}

const popcount = (mask: number): number => mask.toString(2).replaceAll('0', '').length;
