/**
 * When an entry read while fresh is refreshed ahead of its expiry (src/cache/rules/refresh-ahead.ts),
 * and the schedule that runs those refreshes (src/cache/store/refresh-scheduler.ts), on fake clocks.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { freshUntil, refreshAt, refreshWindowMs } from '../../src/cache/rules/refresh-ahead.js';
import { createRefreshScheduler } from '../../src/cache/store/refresh-scheduler.js';

const T0 = Date.UTC(2026, 0, 1);
const entry = (lifetime: number, extra: Partial<{ etag: string | undefined; status: number; initialAge: number }> = {}) => ({
  storedAt: T0,
  initialAge: 0,
  lifetime,
  status: 200,
  etag: 'W/"a"' as string | undefined,
  lastModified: undefined as string | undefined,
  ...extra,
});

describe('when a read entry is refreshed', () => {
  it('the window is a tenth of the lifetime, at least 1 s, at most 30 s, never over half of it', () => {
    expect(refreshWindowMs(60)).toBe(6_000);
    expect(refreshWindowMs(2)).toBe(1_000);
    expect(refreshWindowMs(1)).toBe(500);
    expect(refreshWindowMs(3_600)).toBe(30_000);
  });

  it('a GitHub entry (max-age 60) read early refreshes 3 to 6 s before it expires, spread by the jitter', () => {
    const github = entry(60);
    expect(freshUntil(github)).toBe(T0 + 60_000);
    expect(refreshAt(github, T0 + 1_000, 0)).toBe(T0 + 54_000);
    expect(refreshAt(github, T0 + 1_000, 0.999)).toBeCloseTo(T0 + 56_997, 0);
    // Ten entries stored at once with different jitters refresh at different times.
    const times = new Set(Array.from({ length: 10 }, (_, i) => refreshAt(github, T0, i / 10)));
    expect(times.size).toBe(10);
  });

  it('the Age an entry came with shortens its freshness, and so moves its refresh earlier', () => {
    expect(refreshAt(entry(60, { initialAge: 10 }), T0, 0)).toBe(T0 + 44_000);
  });

  it('a read already inside the window refreshes at once', () => {
    expect(refreshAt(entry(2), T0 + 1_800, 0)).toBe(T0 + 1_800);
  });

  it('an expired entry, one without validators, a non-200 or a zero lifetime is not refreshed ahead', () => {
    expect(refreshAt(entry(2), T0 + 2_000, 0)).toBeUndefined();
    expect(refreshAt(entry(60, { etag: undefined }), T0, 0)).toBeUndefined();
    expect(refreshAt(entry(60, { status: 404 }), T0, 0)).toBeUndefined();
    expect(refreshAt(entry(0), T0, 0)).toBeUndefined();
  });
});

describe('the refresh schedule', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const settle = async () => {
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };

  it('runs a refresh at its time, once; holds its version until the entry expires, then nothing', async () => {
    vi.useFakeTimers({ now: T0 });
    const scheduler = createRefreshScheduler({ maxKeys: 10, maxRunning: 4, tickMs: 100 });
    const ran: number[] = [];
    expect(scheduler.schedule('k', 1, T0 + 1_000, async () => void ran.push(Date.now()), T0 + 2_000)).toBe(true);
    expect(scheduler.has('k', 1)).toBe(true);
    expect(scheduler.has('k', 2)).toBe(false);
    await vi.advanceTimersByTimeAsync(900);
    expect(ran).toEqual([]);
    await vi.advanceTimersByTimeAsync(200);
    expect(ran).toHaveLength(1);
    expect(ran[0]! - T0).toBeGreaterThanOrEqual(1_000);
    expect(ran[0]! - T0).toBeLessThanOrEqual(1_100);
    // A read of the same version after its refresh started (one that failed, say) schedules no other.
    expect(scheduler.has('k', 1)).toBe(true);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(scheduler.has('k', 1)).toBe(false);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(ran).toHaveLength(1);
    expect(scheduler.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0); // the timer stops when nothing is scheduled
    scheduler.close();
  });

  it('a newer version of the entry replaces the older one’s refresh', async () => {
    vi.useFakeTimers({ now: T0 });
    const scheduler = createRefreshScheduler({ maxKeys: 10, maxRunning: 4, tickMs: 100 });
    const ran: string[] = [];
    scheduler.schedule('k', 1, T0 + 500, async () => void ran.push('old'));
    scheduler.schedule('k', 2, T0 + 1_500, async () => void ran.push('new'));
    expect(scheduler.size).toBe(1);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(ran).toEqual(['new']);
    scheduler.close();
  });

  it('runs at most maxRunning refreshes at once; the others wait for a later tick', async () => {
    vi.useFakeTimers({ now: T0 });
    const scheduler = createRefreshScheduler({ maxKeys: 100, maxRunning: 2, tickMs: 100 });
    const release: Array<() => void> = [];
    let started = 0;
    for (let i = 0; i < 5; i++)
      scheduler.schedule(`k${i}`, 1, T0 + 100, () => {
        started++;
        return new Promise<void>((resolve) => release.push(resolve));
      });
    await vi.advanceTimersByTimeAsync(500);
    expect(started).toBe(2);
    expect(scheduler.running).toBe(2);
    release.splice(0).forEach((done) => done());
    await settle();
    await vi.advanceTimersByTimeAsync(200);
    expect(started).toBe(4);
    release.splice(0).forEach((done) => done());
    await settle();
    await vi.advanceTimersByTimeAsync(200);
    expect(started).toBe(5);
    scheduler.close();
  });

  it('hostile: many distinct keys read once never grow the schedule past its bound', () => {
    vi.useFakeTimers({ now: T0 });
    const scheduler = createRefreshScheduler({ maxKeys: 1_000, maxRunning: 4, tickMs: 100 });
    let accepted = 0;
    for (let i = 0; i < 50_000; i++) if (scheduler.schedule(`/repos/o/r${i}`, 1, T0 + 60_000, async () => undefined)) accepted++;
    expect(accepted).toBe(1_000);
    expect(scheduler.size).toBe(1_000);
    // A key already scheduled still takes its next version.
    expect(scheduler.schedule('/repos/o/r0', 2, T0 + 120_000, async () => undefined)).toBe(true);
    expect(vi.getTimerCount()).toBe(1); // one timer for all of them
    scheduler.close();
    expect(scheduler.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    expect(scheduler.schedule('/repos/o/late', 1, T0 + 1_000, async () => undefined)).toBe(false);
  });
});
