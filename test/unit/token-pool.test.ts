import { describe, expect, it } from 'vitest';
import { createTokenPool } from '../../src/pool/backends/local-pool.js';
import { tokenName } from '../../src/platform/config/token-name.js';
import { rateLimitFromBody } from '../../src/pool/rules/rate-limit.js';
import type { Acquired, PoolSettings } from '../../src/pool/rules/types.js';

const NOW = 1_800_000_000_000;
const nowSeconds = NOW / 1000;
const rl =
  (remaining: number, limit = 50, reset = nowSeconds + 60) =>
  (name: string) =>
    ({ 'x-ratelimit-limit': String(limit), 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset': String(reset) })[name];

function pool(overrides: Partial<PoolSettings> = {}, clock = { now: NOW }) {
  const created = createTokenPool({
    tokens: [
      { name: 'a', value: 'va' },
      { name: 'b', value: 'vb' },
    ],
    equivalent: true,
    perTokenConcurrency: 2,
    maxConcurrency: 3,
    queueTimeoutMs: 50,
    maxQueue: 10,
    now: () => clock.now,
    ...overrides,
  });
  for (const name of created.names) created.learn(name, 200, { limit: 50, remaining: 50, reset: nowSeconds + 60, resource: 'core' });
  return created;
}
const leaseOf = (acquired: Acquired) => {
  if (acquired.kind !== 'lease') throw new Error(`expected a lease, got ${JSON.stringify(acquired)}`);
  return acquired.lease;
};

describe('in-process token pool', () => {
  it('names tokens by configuration or by a keyed hash, and never exposes a value', () => {
    expect(tokenName('secret', 'ci')).toBe('ci');
    expect(tokenName('secret')).toMatch(/^tok-[0-9a-f]{8}$/);
    expect(tokenName('secret')).toBe(tokenName('secret'));
    expect(tokenName('secret')).not.toBe(tokenName('secret2'));
    const tokenPool = pool();
    expect(JSON.stringify(tokenPool.snapshot())).not.toMatch(/"v[ab]"/);
    expect(tokenPool.authorizationOf('a')).toBe('token va');
  });

  it('caps concurrency per token and overall, queues, and hands a freed slot to the next waiter', async () => {
    const tokenPool = pool();
    const leases = [leaseOf(await tokenPool.acquire()), leaseOf(await tokenPool.acquire()), leaseOf(await tokenPool.acquire())];
    expect(leases.map((l) => l.name).sort()).toEqual(['a', 'a', 'b']);
    const waiting = tokenPool.acquire(); // whole-upstream cap (3) reached
    expect(tokenPool.queueLength()).toBe(1);
    leases[0]!.settle(200, rl(49), undefined);
    expect(leaseOf(await waiting).name).toBeDefined();
    expect(tokenPool.queueLength()).toBe(0);
  });

  it('a local allowance (Redis outage) limits what this replica spends, and /admin/tokens still shows the upstream numbers', async () => {
    const tokenPool = createTokenPool({
      tokens: [{ name: 'a', value: 'va' }],
      equivalent: true,
      perTokenConcurrency: 10,
      maxConcurrency: 10,
      queueTimeoutMs: 0,
      maxQueue: 10,
      now: () => NOW,
    });
    tokenPool.learn('a', 200, { limit: 50, remaining: 40, reset: nowSeconds + 60, resource: 'core' });
    tokenPool.scaleRemaining(1 / 2);
    expect(tokenPool.snapshot()[0]).toMatchObject({ remaining: 40, used: 10, local_allowance: 20 });
    expect(tokenPool.snapshot()[0]!.resources.core).toEqual({
      limit: 50,
      remaining: 40,
      used: 10,
      reset: nowSeconds + 60,
      local_allowance: 20,
    });
    // Five requests: the upstream says 35 left, the allowance 15; a 304 spends neither.
    for (let left = 39; left >= 35; left--) leaseOf(await tokenPool.acquire()).settle(200, rl(left), undefined);
    leaseOf(await tokenPool.acquire()).settle(304, rl(35), undefined);
    expect(tokenPool.snapshot()[0]).toMatchObject({ remaining: 35, local_allowance: 15 });
    // The allowance, not the upstream's remaining, is what this replica may still spend.
    for (let i = 0; i < 15; i++) leaseOf(await tokenPool.acquire()).settle(200, rl(34 - i), undefined);
    expect(await tokenPool.acquire()).toMatchObject({ kind: 'unavailable', reason: 'exhausted' });
    expect(tokenPool.snapshot()[0]).toMatchObject({ state: 'ok', remaining: 20, local_allowance: 0 });
    // The shared budget answers again: the allowance ends, the numbers were never lowered by it.
    tokenPool.endAllowances();
    expect(tokenPool.snapshot()[0]).toMatchObject({ remaining: 20, local_allowance: null });
    expect(tokenPool.snapshot()[0]!.resources.core?.local_allowance).toBeUndefined();
    expect(leaseOf(await tokenPool.acquire()).name).toBe('a');
  });

  it('answers busy when no slot frees up in time or the queue is full', async () => {
    const tokenPool = pool({ maxQueue: 1 });
    for (let i = 0; i < 3; i++) leaseOf(await tokenPool.acquire());
    const timedOut = tokenPool.acquire();
    expect(await tokenPool.acquire()).toEqual({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 }); // queue full
    expect(await timedOut).toEqual({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
  });

  it('learns from every answer, reserves in-flight units and reports the pool as one quota', async () => {
    const clock = { now: NOW };
    const tokenPool = pool({}, clock);
    expect(tokenPool.rateLimit()).toEqual({ limit: 100, remaining: 100, used: 0, reset: nowSeconds + 60 });
    const lease = leaseOf(await tokenPool.acquire());
    expect(lease.settle(304, rl(40), undefined)).toEqual({ kind: 'ok' });
    const rlNow = tokenPool.rateLimit();
    expect(rlNow.remaining).toBe(90);
    expect(rlNow.limit).toBe(rlNow.remaining + rlNow.used);
  });

  it('reacts to 401, exhaustion and secondary limits, and says when it can serve again', async () => {
    const clock = { now: NOW };
    const tokenPool = pool({ perTokenConcurrency: 10, maxConcurrency: 10 }, clock);
    const first = leaseOf(await tokenPool.acquire());
    // A 401 on a request kills nothing by itself: GET /rate_limit answering 401 does.
    expect(first.settle(401, () => undefined, '{"message":"Bad credentials"}')).toEqual({ kind: 'unauthorized' });
    expect(tokenPool.snapshot().map((t) => t.state)).toEqual(['ok', 'ok']);
    tokenPool.learn(first.name, 401, undefined);
    const second = leaseOf(await tokenPool.acquire());
    expect(second.name).not.toBe(first.name);
    expect(second.settle(403, rl(0, 50, nowSeconds + 120), '{"message":"API rate limit exceeded"}')).toEqual({
      kind: 'exhausted',
      reset: nowSeconds + 120,
    });
    const none = await tokenPool.acquire();
    expect(none).toEqual({ kind: 'unavailable', reason: 'exhausted', retryAfterSeconds: 121 });
    expect(
      tokenPool
        .snapshot()
        .map((t) => t.state)
        .sort(),
    ).toEqual(['dead', 'exhausted']);
    // Every token dead: 503, not 429.
    const allDead = pool({ tokens: [{ name: 'x', value: 'vx' }] }, clock);
    leaseOf(await allDead.acquire()).settle(401, () => undefined, undefined);
    allDead.learn('x', 401, undefined);
    expect(await allDead.acquire()).toEqual({ kind: 'unavailable', reason: 'dead', retryAfterSeconds: 60 });
    clock.now = NOW + 122_000; // past the reset and its grace: the window is renewed
    expect(leaseOf(await tokenPool.acquire()).name).toBe(second.name);
  });

  it('pauses a token after a secondary limit and doubles the pause when it repeats', async () => {
    const clock = { now: NOW };
    const tokenPool = pool({ tokens: [{ name: 'only', value: 'v' }] }, clock);
    const l1 = leaseOf(await tokenPool.acquire());
    l1.settle(403, rl(30), '{"message":"You have exceeded a secondary rate limit"}');
    expect(await tokenPool.acquire()).toEqual({ kind: 'unavailable', reason: 'exhausted', retryAfterSeconds: 60 });
    clock.now += 60_000;
    leaseOf(await tokenPool.acquire()).settle(429, () => undefined, undefined);
    expect(await tokenPool.acquire()).toEqual({ kind: 'unavailable', reason: 'exhausted', retryAfterSeconds: 120 });
    clock.now += 120_000;
    leaseOf(await tokenPool.acquire()).settle(200, rl(29), undefined); // success resets the doubling
    leaseOf(await tokenPool.acquire()).settle(403, (n) => (n === 'retry-after' ? '7' : undefined), undefined);
    expect(await tokenPool.acquire()).toEqual({ kind: 'unavailable', reason: 'exhausted', retryAfterSeconds: 7 });
  });

  it('settling twice counts once', async () => {
    const tokenPool = pool();
    const lease = leaseOf(await tokenPool.acquire());
    lease.settle(200, rl(49), undefined);
    lease.settle(200, rl(49), undefined);
    lease.cancel();
    expect(tokenPool.snapshot().reduce((n, t) => n + t.in_flight, 0)).toBe(0);
  });

  it('reads GET /rate_limit bodies', () => {
    expect(rateLimitFromBody('{"resources":{"core":{"limit":5000,"remaining":4990,"reset":1800000000,"used":10}}}')).toEqual({
      limit: 5000,
      remaining: 4990,
      reset: 1800000000,
      resource: 'core',
    });
    expect(rateLimitFromBody('{"rate":{"limit":60,"remaining":59,"reset":1}}')).toMatchObject({ limit: 60 });
    expect(rateLimitFromBody('not json')).toBeUndefined();
    expect(rateLimitFromBody('{"resources":{}}')).toBeUndefined();
  });
});
