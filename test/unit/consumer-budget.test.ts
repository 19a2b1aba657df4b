import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/platform/log/logger.js';
import {
  createConsumerBudget,
  type Admission,
  type ConsumerBudgetSettings,
  type ConsumerLimits,
} from '../../src/pool/consumers/consumer-budget.js';

const logger = createLogger({ level: 'silent' });
// Mid-hour on a fixed clock: windows never move during a test.
const NOW = Date.UTC(2030, 0, 1, 10, 30, 0);

const limits = (name: string, extra: Partial<ConsumerLimits> = {}): ConsumerLimits => ({
  name,
  weight: 1,
  maxPerHour: null,
  maxConcurrency: null,
  ...extra,
});

function budget(over: Partial<ConsumerBudgetSettings> = {}) {
  const refused: string[] = [];
  const settled: Array<[string, string, number, boolean]> = [];
  const made = createConsumerBudget({
    consumers: [limits('a'), limits('b')],
    reserveFraction: 0.5,
    queueTimeoutMs: 1_000,
    maxQueue: 10,
    figures: () => ({ limit: 100, remaining: 100, reset: NOW / 1000 + 600 }),
    replicas: () => 1,
    logger,
    now: () => NOW,
    events: {
      refused: (consumer, reason) => refused.push(`${consumer}:${reason}`),
      settled: (consumer, resource, outcome) => settled.push([consumer, resource, outcome.upstreamRequests, outcome.spent]),
    },
    ...over,
  });
  return { budget: made, refused, settled };
}

async function spend(made: ReturnType<typeof budget>['budget'], consumer: string, count: number, spent = true): Promise<Admission[]> {
  const out: Admission[] = [];
  for (let i = 0; i < count; i++) {
    const admission = await made.admit(consumer, 'core');
    if (admission.kind === 'admitted') admission.settle({ upstreamRequests: 1, spent });
    out.push(admission);
  }
  return out;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('consumer budget (local counters)', () => {
  it('admits within the share and borrowing, refuses at the reserve, and reports it by name', async () => {
    const { budget: made, refused, settled } = budget();
    const answers = await spend(made, 'a', 80);
    expect(answers.filter((a) => a.kind === 'admitted')).toHaveLength(75);
    expect(answers.at(-1)).toEqual({ kind: 'refused', reason: 'share', retryAfterSeconds: 1800 });
    expect(refused).toHaveLength(5);
    expect(settled[0]).toEqual(['a', 'core', 1, true]);
    const report = made.report();
    expect(report.budget).toBe('local');
    expect(report.consumers.find((c) => c.name === 'a')?.resources.core).toMatchObject({ share: 50, reserve: 25, spent: 75, available: 0 });
    expect(report.consumers.find((c) => c.name === 'b')?.resources.core).toMatchObject({ spent: 0, available: 25 });
    expect((await spend(made, 'b', 25)).every((a) => a.kind === 'admitted')).toBe(true);
  });

  it('gives back the unit only of a request that sent nothing upstream (no token)', async () => {
    const { budget: made } = budget();
    for (let i = 0; i < 200; i++) {
      const admission = await made.admit('a', 'core');
      if (admission.kind !== 'admitted') throw new Error('expected an admission');
      admission.settle({ upstreamRequests: 0, spent: false });
    }
    expect(made.report().consumers[0]!.resources.core!.spent).toBe(0);
  });

  it('keeps the unit of a request that went upstream whatever the answer: a 304 is free of quota, not of points', async () => {
    const { budget: made, settled } = budget({ consumers: [limits('a', { maxPerHour: 10 }), limits('b')] });
    // Forced revalidations answered 304 (or 401/403/429, or a failure): spent nothing of the quota, sent a request each.
    const answers = await spend(made, 'a', 40, false);
    expect(answers.filter((a) => a.kind === 'admitted')).toHaveLength(10);
    expect(answers.at(-1)).toEqual({ kind: 'refused', reason: 'max_per_hour', retryAfterSeconds: 1800 });
    expect(made.report().consumers[0]).toMatchObject({ spent_this_hour: 10, resources: { core: { spent: 10 } } });
    expect(settled.every(([, , , spent]) => !spent)).toBe(true); // the quota metric still counts only what spent quota
    expect((await made.admit('b', 'core')).kind).toBe('admitted');
  });

  it('counts each upstream request a request sent: a retry on another token is one more', async () => {
    const { budget: made } = budget({ consumers: [limits('a', { maxPerHour: 5 }), limits('b')] });
    const first = await made.admit('a', 'core');
    if (first.kind !== 'admitted') throw new Error('expected an admission');
    first.settle({ upstreamRequests: 3, spent: true });
    expect(made.report().consumers[0]).toMatchObject({ spent_this_hour: 3, resources: { core: { spent: 3 } } });
    expect((await spend(made, 'a', 3)).map((a) => a.kind)).toEqual(['admitted', 'admitted', 'refused']);
  });

  it('hostile settle outcomes (negative, fractional, not a number) never give back more than the unit', async () => {
    const { budget: made } = budget();
    for (const upstreamRequests of [-5, 0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      const admission = await made.admit('a', 'core');
      if (admission.kind !== 'admitted') throw new Error('expected an admission');
      admission.settle({ upstreamRequests, spent: false });
    }
    // -5 and 0.5 send nothing (given back), NaN and Infinity count the one unit admitted.
    expect(made.report().consumers[0]!.resources.core!.spent).toBe(2);
  });

  it('counts a burst before any of it returns: 100 concurrent admissions, 75 admitted', async () => {
    const { budget: made } = budget();
    const answers = await Promise.all(Array.from({ length: 100 }, () => made.admit('a', 'core')));
    expect(answers.filter((a) => a.kind === 'admitted')).toHaveLength(75);
  });

  it('settling twice counts once (hostile or buggy caller)', async () => {
    const { budget: made, settled } = budget();
    const admission = await made.admit('a', 'core');
    if (admission.kind !== 'admitted') throw new Error('expected an admission');
    admission.settle({ upstreamRequests: 0, spent: false });
    admission.settle({ upstreamRequests: 0, spent: false });
    admission.settle({ upstreamRequests: 3, spent: true });
    expect(settled).toHaveLength(1);
    expect(made.report().consumers[0]!.resources.core!.spent).toBe(0);
  });

  it('max_per_hour counts every resource and answers with the end of the hour', async () => {
    const { budget: made } = budget({ consumers: [limits('a', { maxPerHour: 3 }), limits('b')] });
    await spend(made, 'a', 2);
    const search = await made.admit('a', 'search');
    if (search.kind === 'admitted') search.settle({ upstreamRequests: 1, spent: true });
    expect(await made.admit('a', 'core')).toEqual({ kind: 'refused', reason: 'max_per_hour', retryAfterSeconds: 1800 });
    expect((await made.admit('b', 'core')).kind).toBe('admitted');
    expect(made.report().consumers[0]!.spent_this_hour).toBe(3);
  });

  it('max_concurrency: the others wait in order for a slot, or are refused when none frees up in time', async () => {
    vi.useFakeTimers();
    const { budget: made, refused } = budget({ consumers: [limits('a', { maxConcurrency: 1 }), limits('b')] });
    const first = await made.admit('a', 'core');
    const second = made.admit('a', 'core');
    const third = made.admit('a', 'core');
    // b is not held by a's cap.
    expect((await made.admit('b', 'core')).kind).toBe('admitted');
    expect(made.report().consumers[0]).toMatchObject({ in_flight: 1, waiting: 2 });
    if (first.kind !== 'admitted') throw new Error('expected an admission');
    first.settle({ upstreamRequests: 1, spent: true });
    const got = await second;
    expect(got.kind).toBe('admitted');
    vi.advanceTimersByTime(1_001);
    expect(await third).toEqual({ kind: 'refused', reason: 'max_concurrency', retryAfterSeconds: 1 });
    expect(refused).toEqual(['a:max_concurrency']);
  });

  it('a full wait answers at once, and close answers every waiter', async () => {
    const { budget: made } = budget({ consumers: [limits('a', { maxConcurrency: 1 })], maxQueue: 1 });
    await made.admit('a', 'core');
    const waiting = made.admit('a', 'core');
    expect((await made.admit('a', 'core')).kind).toBe('refused');
    made.close();
    expect((await waiting).kind).toBe('refused');
  });

  it('one consumer waiting for its max_concurrency slots never takes the room another needs to wait', async () => {
    vi.useFakeTimers();
    // max_queue 6 over weights a 1 + b 1 + unkeyed 1: each may have 2 waiting.
    const { budget: made } = budget({ consumers: [limits('a', { maxConcurrency: 1 }), limits('b', { maxConcurrency: 1 })], maxQueue: 6 });
    expect((await made.admit('a', 'core')).kind).toBe('admitted');
    const waitingA = [made.admit('a', 'core'), made.admit('a', 'core')];
    // a beyond its own bound: refused at once, as a full wait is.
    for (let i = 0; i < 5; i++)
      expect(await made.admit('a', 'core')).toEqual({ kind: 'refused', reason: 'max_concurrency', retryAfterSeconds: 1 });
    const first = await made.admit('b', 'core');
    if (first.kind !== 'admitted') throw new Error('expected an admission');
    const waitingB = made.admit('b', 'core'); // b still has room to wait for its slot
    expect(made.report().consumers.map((c) => c.waiting)).toEqual([2, 1]);
    first.settle({ upstreamRequests: 1, spent: true });
    expect((await waitingB).kind).toBe('admitted');
    made.close();
    for (const answer of await Promise.all(waitingA)) expect(answer.kind).toBe('refused');
  });

  it('an unconfigured name gets no share and takes no reserve', async () => {
    const { budget: made } = budget();
    const answers = await spend(made, 'mallory', 100);
    expect(answers.filter((a) => a.kind === 'admitted')).toHaveLength(50); // 100 - the reserves of a and b
    expect(made.report().consumers.map((c) => c.name)).toEqual(['a', 'b']);
  });

  it('numbers not known yet: nothing to divide, every request is admitted and counted', async () => {
    const { budget: made } = budget({ figures: () => undefined });
    expect((await spend(made, 'a', 150)).every((a) => a.kind === 'admitted')).toBe(true);
    expect(made.report().consumers[0]!.resources.core!.spent).toBe(150);
  });
});
