import { describe, expect, it } from 'vitest';
import { createTokenPool } from '../../src/tokens/local-pool.js';
import { tokenName } from '../../src/tokens/name.js';
import { rateLimitFromBody } from '../../src/tokens/rate-limit.js';
import type { Acquired, PoolSettings } from '../../src/tokens/types.js';

const NOW = 1_800_000_000_000;
const s = NOW / 1000;
const rl =
  (remaining: number, limit = 50, reset = s + 60) =>
  (n: string) =>
    ({ 'x-ratelimit-limit': String(limit), 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset': String(reset) })[n];

function pool(o: Partial<PoolSettings> = {}, clock = { now: NOW }) {
  const p = createTokenPool({
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
    ...o,
  });
  for (const name of p.names) p.learn(name, 200, { limit: 50, remaining: 50, reset: s + 60, resource: 'core' });
  return p;
}
const leaseOf = (a: Acquired) => {
  if (a.kind !== 'lease') throw new Error(`expected a lease, got ${JSON.stringify(a)}`);
  return a.lease;
};

describe('in-process token pool', () => {
  it('names tokens by configuration or by a keyed hash, and never exposes a value', () => {
    expect(tokenName('secret', 'ci')).toBe('ci');
    expect(tokenName('secret')).toMatch(/^tok-[0-9a-f]{8}$/);
    expect(tokenName('secret')).toBe(tokenName('secret'));
    expect(tokenName('secret')).not.toBe(tokenName('secret2'));
    const p = pool();
    expect(JSON.stringify(p.snapshot())).not.toMatch(/"v[ab]"/);
    expect(p.authorizationOf('a')).toBe('token va');
  });

  it('caps concurrency per token and overall, queues, and hands a freed slot to the next waiter', async () => {
    const p = pool();
    const leases = [leaseOf(await p.acquire()), leaseOf(await p.acquire()), leaseOf(await p.acquire())];
    expect(leases.map((l) => l.name).sort()).toEqual(['a', 'a', 'b']);
    const waiting = p.acquire(); // whole-upstream cap (3) reached
    expect(p.queueLength()).toBe(1);
    leases[0]!.settle(200, rl(49), undefined);
    expect(leaseOf(await waiting).name).toBeDefined();
    expect(p.queueLength()).toBe(0);
  });

  it('answers busy when no slot frees up in time or the queue is full', async () => {
    const p = pool({ maxQueue: 1 });
    for (let i = 0; i < 3; i++) leaseOf(await p.acquire());
    const timedOut = p.acquire();
    expect(await p.acquire()).toEqual({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 }); // queue full
    expect(await timedOut).toEqual({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
  });

  it('learns from every answer, reserves in-flight units and reports the pool as one quota', async () => {
    const clock = { now: NOW };
    const p = pool({}, clock);
    expect(p.rateLimit()).toEqual({ limit: 100, remaining: 100, used: 0, reset: s + 60 });
    const l = leaseOf(await p.acquire());
    expect(l.settle(304, rl(40), undefined)).toEqual({ kind: 'ok' });
    const rlNow = p.rateLimit();
    expect(rlNow.remaining).toBe(90);
    expect(rlNow.limit).toBe(rlNow.remaining + rlNow.used);
  });

  it('reacts to 401, exhaustion and secondary limits, and says when it can serve again', async () => {
    const clock = { now: NOW };
    const p = pool({ perTokenConcurrency: 10, maxConcurrency: 10 }, clock);
    const first = leaseOf(await p.acquire());
    expect(first.settle(401, () => undefined, '{"message":"Bad credentials"}')).toEqual({ kind: 'dead' });
    const second = leaseOf(await p.acquire());
    expect(second.name).not.toBe(first.name);
    expect(second.settle(403, rl(0, 50, s + 120), '{"message":"API rate limit exceeded"}')).toEqual({ kind: 'exhausted', reset: s + 120 });
    const none = await p.acquire();
    expect(none).toEqual({ kind: 'unavailable', reason: 'exhausted', retryAfterSeconds: 121 });
    expect(
      p
        .snapshot()
        .map((t) => t.state)
        .sort(),
    ).toEqual(['dead', 'exhausted']);
    // Every token dead: 503, not 429.
    const allDead = pool({ tokens: [{ name: 'x', value: 'vx' }] }, clock);
    leaseOf(await allDead.acquire()).settle(401, () => undefined, undefined);
    expect(await allDead.acquire()).toEqual({ kind: 'unavailable', reason: 'dead', retryAfterSeconds: 60 });
    clock.now = NOW + 122_000; // past the reset and its grace: the window is renewed
    expect(leaseOf(await p.acquire()).name).toBe(second.name);
  });

  it('pauses a token after a secondary limit and doubles the pause when it repeats', async () => {
    const clock = { now: NOW };
    const p = pool({ tokens: [{ name: 'only', value: 'v' }] }, clock);
    const l1 = leaseOf(await p.acquire());
    l1.settle(403, rl(30), '{"message":"You have exceeded a secondary rate limit"}');
    expect(await p.acquire()).toEqual({ kind: 'unavailable', reason: 'exhausted', retryAfterSeconds: 60 });
    clock.now += 60_000;
    leaseOf(await p.acquire()).settle(429, () => undefined, undefined);
    expect(await p.acquire()).toEqual({ kind: 'unavailable', reason: 'exhausted', retryAfterSeconds: 120 });
    clock.now += 120_000;
    leaseOf(await p.acquire()).settle(200, rl(29), undefined); // success resets the doubling
    leaseOf(await p.acquire()).settle(403, (n) => (n === 'retry-after' ? '7' : undefined), undefined);
    expect(await p.acquire()).toEqual({ kind: 'unavailable', reason: 'exhausted', retryAfterSeconds: 7 });
  });

  it('settling twice counts once', async () => {
    const p = pool();
    const l = leaseOf(await p.acquire());
    l.settle(200, rl(49), undefined);
    l.settle(200, rl(49), undefined);
    l.cancel();
    expect(p.snapshot().reduce((n, t) => n + t.in_flight, 0)).toBe(0);
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
