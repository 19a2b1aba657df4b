import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createTokenPool } from '../../src/pool/backends/local-pool.js';
import { createIpcTokenPool, servePool } from '../../src/pool/backends/ipc-pool.js';
import { channelPair } from '../helpers/ipc-channel.js';
import { parseConfig } from '../../src/platform/config/load.js';
import type { Acquired, PoolSettings } from '../../src/pool/rules/types.js';

const NOW = 1_800_000_000_000;
const ok = (name: string) =>
  ({ 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '4000', 'x-ratelimit-reset': String(NOW / 1000 + 3600) })[name];

/** A pool of `names` paced at `perMinute` REST points (burst: perMinute / 6 + 1 in 10 s), on the fake clock. */
function pool(perMinute: number, overrides: Partial<PoolSettings> = {}, names = ['a']) {
  const rejected: string[] = [];
  const created = createTokenPool({
    tokens: names.map((name) => ({ name, value: `v${name}` })),
    equivalent: true,
    perTokenConcurrency: 100,
    maxConcurrency: 100,
    queueTimeoutMs: 2_000,
    maxQueue: 100,
    points: { rest: perMinute, graphql: perMinute },
    events: { rejected: (reason) => rejected.push(reason) },
    ...overrides,
  });
  for (const name of created.names) created.learn(name, 200, { limit: 5000, remaining: 4000, reset: NOW / 1000 + 3600, resource: 'core' });
  return { pool: created, rejected };
}

/** Takes a lease and settles it at once (a 200); returns the token's name. */
function spend(answer: Acquired): string {
  if (answer.kind !== 'lease') throw new Error(`expected a lease, got ${JSON.stringify(answer)}`);
  answer.lease.settle(200, ok, undefined);
  return answer.lease.name;
}

describe('pool pacing under secondary limits', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(NOW);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a burst gets a sixth of the minute plus one at once; the next request waits for the 10 s window to move', async () => {
    const { pool: paced } = pool(60); // 11 points in any 10 s
    for (let i = 0; i < 11; i++) spend(await paced.acquire());
    const waiting = paced.acquire({ points: 1 });
    expect(paced.queueLength()).toBe(0); // points are back after the queue timeout: answered at once
    const answer = await waiting;
    expect(answer).toMatchObject({ kind: 'unavailable', reason: 'paced', retryAfterSeconds: 10 });
  });

  it('queues a request whose points come back within queue_timeout_ms, then serves it', async () => {
    const { pool: paced } = pool(60, { queueTimeoutMs: 15_000 });
    for (let i = 0; i < 11; i++) spend(await paced.acquire());
    let answer: Acquired | undefined;
    void paced.acquire().then((got) => (answer = got));
    await vi.advanceTimersByTimeAsync(9_000);
    expect(answer).toBeUndefined();
    expect(paced.queueLength()).toBe(1);
    await vi.advanceTimersByTimeAsync(1_100);
    expect(answer?.kind).toBe('lease');
  });

  it('answers a queued request 429 with Retry-After (not a 503) when its wait for points runs out', async () => {
    const { pool: paced, rejected } = pool(60, { queueTimeoutMs: 12_000 });
    for (let i = 0; i < 11; i++) spend(await paced.acquire());
    // 12 wait for the 10 s window to move; it frees 11 points, so the last one's turn is at 20 s.
    const answers: Acquired[] = [];
    for (let i = 0; i < 12; i++) void paced.acquire().then((got) => answers.push(got));
    await vi.advanceTimersByTimeAsync(10_300);
    expect(answers.filter((got) => got.kind === 'lease')).toHaveLength(11);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(answers[11]).toMatchObject({ kind: 'unavailable', reason: 'paced' });
    const retryAfter = answers[11]?.kind === 'unavailable' ? answers[11].retryAfterSeconds : 0;
    expect(retryAfter).toBeGreaterThanOrEqual(7); // the point frees at 20 s, about 8 s after the timeout
    expect(retryAfter).toBeLessThanOrEqual(9);
    expect(rejected).toEqual(['paced']);
  });

  it('a wait for a concurrency slot still ends busy (503) when points are not what held it', async () => {
    const { pool: blocked, rejected } = pool(60, { queueTimeoutMs: 3_000, maxConcurrency: 1 });
    const held = await blocked.acquire();
    let answer: Acquired | undefined;
    void blocked.acquire().then((got) => (answer = got));
    await vi.advanceTimersByTimeAsync(3_001);
    expect(answer).toMatchObject({ kind: 'unavailable', reason: 'busy' });
    expect(held.kind).toBe('lease');
    expect(rejected).toEqual(['queue_timeout']);
  });

  it('spreads requests to another token when one has spent its points', async () => {
    const { pool: paced } = pool(60, {}, ['a', 'b']);
    const names: string[] = [];
    for (let i = 0; i < 22; i++) names.push(spend(await paced.acquire()));
    expect(names.filter((name) => name === 'a')).toHaveLength(11);
    expect(names.filter((name) => name === 'b')).toHaveLength(11);
    expect(await paced.acquire()).toMatchObject({ kind: 'unavailable', reason: 'paced' });
  });

  it('counts writes as 5 points', async () => {
    const { pool: paced } = pool(60);
    spend(await paced.acquire({ points: 5 }));
    spend(await paced.acquire({ points: 5 }));
    expect((await paced.acquire({ points: 5 })).kind).toBe('unavailable'); // 10 of 11 spent
    spend(await paced.acquire({ points: 1 }));
  });

  it('keeps GraphQL points apart from REST ones', async () => {
    const { pool: paced } = pool(60);
    for (let i = 0; i < 11; i++) spend(await paced.acquire());
    expect((await paced.acquire({ resource: 'core' })).kind).toBe('unavailable');
    expect((await paced.acquire({ resource: 'graphql' })).kind).toBe('lease');
  });

  it('background work uses only what clients leave: it stops short of the reserve and never waits', async () => {
    const { pool: paced, rejected } = pool(600); // 101 in 10 s; background stops at 91
    let background = 0;
    while ((await paced.acquire({ background: true })).kind === 'lease') background++;
    expect(background).toBe(91);
    expect(rejected).toEqual(['background']);
    expect(paced.queueLength()).toBe(0);
    spend(await paced.acquire()); // a client still goes
  });

  it('background work goes after clients that wait', async () => {
    const { pool: paced, rejected } = pool(6000, { maxConcurrency: 1 });
    const first = await paced.acquire();
    const client = paced.acquire(); // waits for the slot
    expect(paced.queueLength()).toBe(1);
    expect(await paced.acquire({ background: true })).toMatchObject({ kind: 'unavailable' });
    expect(rejected).toEqual(['background']);
    spend(first);
    expect((await client).kind).toBe('lease');
  });

  it('without a points setting nothing is paced', async () => {
    const { pool: unpaced } = pool(60, { points: undefined });
    for (let i = 0; i < 50; i++) spend(await unpaced.acquire());
  });

  it("cluster workers spend the primary's points: a write's 5, and background work's reserve", async () => {
    vi.useRealTimers(); // the IPC channel crosses on setImmediate
    const { pool: owned } = pool(60);
    const { primary, worker } = channelPair();
    const served = servePool(owned, primary);
    const remote = createIpcTokenPool(worker, ['a'], true, new Map([['a', 'token va']]));
    spend(await remote.acquire({ points: 5 }));
    spend(await remote.acquire({ points: 5 }));
    expect(await remote.acquire({ points: 5 })).toMatchObject({ kind: 'unavailable', reason: 'paced' }); // 10 of 11
    expect(await remote.acquire({ background: true })).toMatchObject({ kind: 'unavailable' }); // the reserve is the clients'
    spend(await remote.acquire());
    served.close();
    remote.close();
    owned.close();
  });

  it("takes GitHub's budgets by default and refuses a budget that is not a positive integer, naming the key", () => {
    const upstreams = [{ name: 'gh', prefix: '/', url: 'http://x' }];
    expect(parseConfig({ upstreams }).pool).toMatchObject({ points_per_minute: 900, graphql_points_per_minute: 2000 });
    for (const bad of [0, -5, 1.5, '900', null, 1e9]) {
      expect(() => parseConfig({ upstreams, pool: { points_per_minute: bad } })).toThrow(/pool\.points_per_minute/);
      expect(() => parseConfig({ upstreams, pool: { graphql_points_per_minute: bad } })).toThrow(/pool\.graphql_points_per_minute/);
    }
  });
});
