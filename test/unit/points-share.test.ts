/**
 * The secondary-limit points consumers leave each other (src/pool/rules/points-share.ts, applied by
 * the in-process pool): one consumer taking every point the moment it comes back no longer starves
 * another that asks every few seconds, while a consumer alone still takes every point. On the fake
 * clock, at the full size: one token at 60 points a minute.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createTokenPool } from '../../src/pool/backends/local-pool.js';
import { owedPoints } from '../../src/pool/rules/points-share.js';
import type { Acquired, PoolSettings } from '../../src/pool/rules/types.js';

const NOW = 1_800_000_000_000;
const ok = (name: string) =>
  ({ 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '4000', 'x-ratelimit-reset': String(NOW / 1000 + 3600) })[name];
/** A wait on the fake clock (node:timers/promises is not faked). */
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** One token paced at `perMinute`, consumers `abuser` and `polite` of weight 1, the default reserve fraction. */
function pool(perMinute: number, overrides: Partial<PoolSettings> = {}) {
  const created = createTokenPool({
    tokens: [{ name: 'a', value: 'va' }],
    equivalent: true,
    perTokenConcurrency: 100,
    maxConcurrency: 100,
    queueTimeoutMs: 2_000,
    maxQueue: 100,
    points: { rest: perMinute, graphql: perMinute },
    consumerWeights: new Map([
      ['abuser', 1],
      ['polite', 1],
    ]),
    reserveFraction: 0.5,
    ...overrides,
  });
  created.learn('a', 200, { limit: 5000, remaining: 4000, reset: NOW / 1000 + 3600, resource: 'core' });
  return created;
}

/**
 * `loops` loops of the abuser asking again the moment an answer comes (a lease is an upstream
 * request of 2 ms, a refusal costs it `backoffMs`), while `polite` asks every `everyMs`, `count` times.
 */
async function contend(made: ReturnType<typeof pool>, loops: number, everyMs: number, count: number, backoffMs = 2) {
  let done = false;
  let abuser = 0;
  const loop = async (): Promise<void> => {
    while (!done) {
      const got = await made.acquire({ consumer: 'abuser' });
      await sleep(got.kind === 'lease' ? 2 : backoffMs);
      if (got.kind === 'lease') {
        abuser++;
        got.lease.settle(304, ok, undefined);
      }
    }
  };
  const running = Array.from({ length: loops }, loop);
  const polite: Array<Promise<Acquired>> = [];
  for (let i = 0; i < count; i++) {
    if (i > 0) await vi.advanceTimersByTimeAsync(everyMs);
    polite.push(
      made.acquire({ consumer: 'polite' }).then((got) => {
        if (got.kind === 'lease') got.lease.settle(200, ok, undefined);
        return got;
      }),
    );
  }
  await vi.advanceTimersByTimeAsync(everyMs);
  const answers = await Promise.all(polite);
  done = true;
  made.close(); // answers the loops' waiters
  await vi.advanceTimersByTimeAsync(200);
  await Promise.all(running);
  return { abuser, polite: answers };
}

describe('the points rule (pure)', () => {
  const use = (asked: number, spent: number, weight = 1) => ({ weight, asked, spent });

  it('owes an active consumer one point beyond what it asked for, up to its share, and at least its reserve', () => {
    // A window of 60 points, two active consumers of weight 1: share 30, reserve 15.
    expect(owedPoints(use(20, 19), 2, 60, 0.5)).toBe(2); // max(min(30, 21), 15) - 19
    expect(owedPoints(use(3, 3), 2, 60, 0)).toBe(1); // one ahead
    expect(owedPoints(use(3, 3), 2, 60, 0.5)).toBe(12); // its reserve, less what it spent
    expect(owedPoints(use(500, 10), 2, 60, 0.5)).toBe(20); // never beyond its share
    expect(owedPoints(use(40, 35), 2, 60, 0.5)).toBe(0);
  });

  it('owes nothing to a consumer that asked nothing, and nothing on hostile numbers', () => {
    expect(owedPoints(use(0, 0), 2, 60, 0.5)).toBe(0);
    expect(owedPoints(use(5, 0), 0, 60, 0.5)).toBe(0);
    expect(owedPoints(use(5, 0), 2, 0, 0.5)).toBe(0);
    expect(owedPoints(use(5, 0), 2, 60, 7)).toBe(30); // a fraction above 1 counts as 1
    expect(owedPoints(use(5, 0), 2, 60, -3)).toBe(6); // below 0 as 0
  });
});

describe('points shared between consumers (one token at 60 points a minute)', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(NOW);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('four loops taking every point as it comes back leave a consumer asking every 3 s at least 9 of 10 (and themselves the rest)', async () => {
    const { abuser, polite } = await contend(pool(60), 4, 3_000, 10);
    const served = polite.filter((got) => got.kind === 'lease').length;
    expect(served).toBeGreaterThanOrEqual(9);
    // The rule lends out what the polite consumer does not ask for: in 30 s the pace allows 33 to 44.
    expect(abuser + served).toBeGreaterThanOrEqual(30);
    for (const got of polite) if (got.kind === 'unavailable') expect(got.reason).toBe('paced');
  });

  it('holds for a consumer asking every 3 s for five minutes, whatever the queue timeout', async () => {
    for (const queueTimeoutMs of [2_000, 10_000]) {
      // The abuser asks again 100 ms after a refusal: still at once on the scale of the pace.
      const { polite } = await contend(pool(60, { queueTimeoutMs }), 4, 3_000, 100, 100);
      expect(polite.filter((got) => got.kind === 'lease').length).toBeGreaterThanOrEqual(90);
    }
  });

  it('a consumer alone takes every point: nothing is held for consumers that asked nothing', async () => {
    const made = pool(60);
    for (let i = 0; i < 11; i++) {
      const got = await made.acquire({ consumer: 'abuser' });
      expect(got.kind).toBe('lease');
      if (got.kind === 'lease') got.lease.settle(304, ok, undefined);
    }
    expect(await made.acquire({ consumer: 'abuser' })).toMatchObject({ kind: 'unavailable', reason: 'paced' });
    made.close();
  });

  /** Whether `promise` has settled after the pending jobs ran (the fake clock does not move). */
  async function settled<T>(promise: Promise<T>): Promise<T | undefined> {
    let value: T | undefined;
    void promise.then((got) => (value = got));
    await vi.advanceTimersByTimeAsync(0);
    return value;
  }

  it('a held consumer waits in the queue while another consumer is served, and a timed-out wait is a 429 with Retry-After', async () => {
    const made = pool(60, { queueTimeoutMs: 3_000 });
    // The polite consumer asks once: it is owed its reserve (2.75 of the 10 s window's 11 points).
    const first = await made.acquire({ consumer: 'polite' });
    expect(first.kind).toBe('lease');
    let leased = 0;
    for (;;) {
      const got = await settled(made.acquire({ consumer: 'abuser' }));
      if (got?.kind !== 'lease') break;
      leased++;
      got.lease.settle(304, ok, undefined);
    }
    expect(leased).toBe(8); // 11 points, 1 spent by the polite consumer, 2 owed to it
    expect(made.queueLength()).toBe(1); // the abuser's last request waits
    expect((await settled(made.acquire({ consumer: 'polite' })))?.kind).toBe('lease'); // served past that waiter
    const waiting = made.acquire({ consumer: 'abuser' });
    await vi.advanceTimersByTimeAsync(3_100);
    const refused = await waiting;
    expect(refused).toMatchObject({ kind: 'unavailable', reason: 'points' }); // its consumer's refusal, not the pool's
    if (refused.kind === 'unavailable') expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    made.close();
  });

  it('with queue_timeout_ms 0 a held request gets its consumer 429 at once, not a 503', async () => {
    const made = pool(60, { queueTimeoutMs: 0 });
    expect((await made.acquire({ consumer: 'polite' })).kind).toBe('lease');
    let answer: Acquired | undefined;
    for (let i = 0; i < 12; i++) {
      answer = await made.acquire({ consumer: 'abuser' });
      if (answer.kind !== 'lease') break;
      answer.lease.settle(304, ok, undefined);
    }
    expect(answer).toMatchObject({ kind: 'unavailable', reason: 'points' });
    made.close();
  });

  it('hostile consumers: an unknown name or none at all are not held for, and background work is held like the rest', async () => {
    const made = pool(60);
    expect((await made.acquire({ consumer: 'polite' })).kind).toBe('lease');
    let leased = 0;
    for (const consumer of ['stranger', undefined, 'stranger', undefined, 'abuser', 'abuser', 'abuser', 'abuser', 'abuser']) {
      const got = await settled(made.acquire({ consumer }));
      if (got?.kind === 'lease') leased++;
    }
    // 11 points: 1 spent by polite, 2 owed to it; strangers and the unnamed hold nothing and take 4, the abuser 4.
    expect(leased).toBe(8);
    expect(await settled(made.acquire({ consumer: 'abuser', background: true }))).toMatchObject({ kind: 'unavailable' });
    made.close();
  });
});
