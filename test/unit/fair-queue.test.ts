import { afterEach, describe, expect, it, vi } from 'vitest';
import { queueBounds } from '../../src/pool/rules/fair-share.js';
import { createWaitQueue, type Attempt } from '../../src/pool/backends/queue.js';
import type { AcquireOptions, Acquired, Lease } from '../../src/pool/rules/types.js';

/**
 * A queue over `slots` free slots: each lease takes one, named after the consumer it went to.
 * Consumers in `held` always wait for a reason of their own (their points owed to others).
 */
function harness(opts: { maxQueue?: number; timeoutMs?: number; laneBound?: (consumer: string) => number; held?: Set<string> } = {}) {
  let slots = 0;
  const served: string[] = [];
  const lease = (name: string): Acquired => ({
    kind: 'lease',
    lease: {
      name,
      resource: 'core',
      authorization: '',
      switched: false,
      settle: () => ({ kind: 'ok' }),
      cancel: () => undefined,
    } satisfies Lease,
  });
  const queue = createWaitQueue({
    attempt(acquire: AcquireOptions): Attempt {
      if (opts.held?.has(acquire.consumer ?? '') === true) return { kind: 'wait', own: true };
      if (slots <= 0) return { kind: 'wait' };
      slots--;
      return lease(acquire.consumer ?? '-');
    },
    timeoutMs: opts.timeoutMs ?? 60_000,
    maxQueue: opts.maxQueue ?? 100_000,
    laneBound: opts.laneBound,
    now: Date.now,
    events: {},
  });
  const ask = (consumer?: string, weight?: number): Promise<Acquired> =>
    queue.acquire({ consumer, weight }).then((acquired) => {
      if (acquired.kind === 'lease') served.push(acquired.lease.name);
      return acquired;
    });
  /** Frees `count` slots one at a time, as leases coming back do. */
  const free = async (count: number): Promise<void> => {
    for (let i = 0; i < count; i++) {
      slots++;
      queue.pump();
    }
    await Promise.resolve();
  };
  /** Slots that came back without telling the queue (points return with time: only a timer or a newcomer pumps). */
  const returned = (count: number): void => {
    slots += count;
  };
  return { queue, ask, free, returned, served };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('the wait queue: weighted fair order by consumer', () => {
  it('a consumer arriving behind a burst of another is served with the next free slot', async () => {
    const { ask, free, served, queue } = harness();
    const burst = Array.from({ length: 300 }, () => ask('greedy'));
    await free(5);
    const polite = ask('polite');
    await free(2);
    expect(served.slice(0, 7)).toContain('polite');
    await free(300);
    await Promise.all([...burst, polite]);
    expect(served.filter((name) => name === 'greedy')).toHaveLength(300);
    expect(queue.length()).toBe(0);
  });

  it('shares freed slots by weight while both wait', async () => {
    const { ask, free, served } = harness();
    const heavy = Array.from({ length: 60 }, () => ask('heavy', 2));
    const light = Array.from({ length: 60 }, () => ask('light', 1));
    await free(30);
    const counts = { heavy: served.filter((n) => n === 'heavy').length, light: served.filter((n) => n === 'light').length };
    expect(counts.heavy).toBeGreaterThanOrEqual(19);
    expect(counts.heavy).toBeLessThanOrEqual(21);
    expect(counts.heavy + counts.light).toBe(30);
    await free(200);
    await Promise.all([...heavy, ...light]);
  });

  it('an idle consumer banks no credit: it takes its turn, not the whole queue', async () => {
    const { ask, free, served } = harness();
    // "early" was served alone for a while; then both wait.
    for (let i = 0; i < 20; i++) void ask('early');
    await free(20);
    const later = Array.from({ length: 10 }, () => ask('late'));
    const more = Array.from({ length: 10 }, () => ask('early'));
    served.length = 0;
    await free(10);
    expect(served.filter((n) => n === 'late').length).toBeGreaterThanOrEqual(4);
    expect(served.filter((n) => n === 'early').length).toBeGreaterThanOrEqual(4);
    await free(100);
    await Promise.all([...later, ...more]);
  });

  it('without consumers it is first in, first out', async () => {
    const { queue, free } = harness();
    const order: number[] = [];
    const waiting = Array.from({ length: 20 }, (_, i) => queue.acquire({}).then(() => order.push(i)));
    await free(20);
    await Promise.all(waiting);
    expect(order).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it('hostile weights and names are served, never crash nor starve the others', async () => {
    const { ask, free, served } = harness();
    const odd = [
      ask('__proto__', Number.NaN),
      ask('constructor', -1),
      ask('zero', 0),
      ask('huge', Number.MAX_VALUE),
      ask('inf', Infinity),
      ask('', 1),
    ];
    const burst = Array.from({ length: 50 }, () => ask('huge', Number.MAX_VALUE));
    const normal = ask('normal', 1);
    await free(12);
    expect(served).toContain('normal');
    expect(served).toContain('__proto__');
    await free(100);
    await Promise.all([...odd, ...burst, normal]);
  });

  it('a waiter that times out leaves its place, and the others keep their order', async () => {
    vi.useFakeTimers();
    const { ask, free, served, queue } = harness({ timeoutMs: 1_000 });
    const first = ask('a');
    vi.advanceTimersByTime(600);
    const second = ask('b');
    vi.advanceTimersByTime(500);
    expect(await first).toMatchObject({ kind: 'unavailable', reason: 'busy' });
    expect(queue.length()).toBe(1);
    await free(1);
    expect(await second).toMatchObject({ kind: 'lease' });
    expect(served).toEqual(['b']);
  });

  it('a full queue answers busy at once; close answers every waiter', async () => {
    const { ask, queue } = harness({ maxQueue: 3 });
    const waiting = [ask('a'), ask('a'), ask('b')];
    expect(await ask('b')).toMatchObject({ kind: 'unavailable', reason: 'busy' });
    queue.close();
    for (const answer of await Promise.all(waiting)) expect(answer).toMatchObject({ kind: 'unavailable', reason: 'busy' });
  });

  it('a consumer whose head waits for a reason of its own (its points owed to others) holds up no other consumer', async () => {
    const held = new Set(['held']);
    const { ask, free, served, queue } = harness({ held });
    const stuck = ask('held'); // first in line, smallest tag
    const others = [ask('a'), ask('b')];
    await free(2);
    await Promise.all(others);
    expect(served).toEqual(['a', 'b']);
    held.clear();
    await free(1);
    expect(await stuck).toMatchObject({ kind: 'lease' });
    expect(queue.length()).toBe(0);
  });

  it('a newcomer never takes what came back before the waiters had their turn', async () => {
    const { ask, returned, served, queue } = harness();
    const waiting = [ask('greedy'), ask('polite')];
    returned(2); // two slots back, no pump yet (the wake-up timer has not fired)
    const newcomer = ask('greedy');
    await Promise.all(waiting);
    expect(served).toEqual(['greedy', 'polite']);
    expect(queue.length()).toBe(1); // the newcomer waits its turn
    returned(1);
    queue.pump();
    expect(await newcomer).toMatchObject({ kind: 'lease' });
  });

  it('bounded per consumer: a flood fills only its own lane, and another consumer still waits its turn', async () => {
    const { ask, free, queue, served } = harness({
      maxQueue: 4,
      laneBound: queueBounds(
        4,
        new Map([
          ['greedy', 1],
          ['polite', 1],
        ]),
      ),
    });
    // 4 over weights greedy 1 + polite 1 + unkeyed 1: one waiter each.
    const greedy = ask('greedy');
    const beyond = await Promise.all(Array.from({ length: 5 }, () => ask('greedy')));
    for (const answer of beyond) expect(answer).toEqual({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
    const polite = ask('polite');
    const unkeyed = ask();
    expect(queue.length()).toBe(3);
    await free(3);
    await Promise.all([greedy, polite, unkeyed]);
    expect([...served].sort()).toEqual(['-', 'greedy', 'polite']);
  });
});
