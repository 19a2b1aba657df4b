/**
 * Hardening: Redis faults under a steady load. Two `etagere serve` processes share one Redis and
 * one fake upstream; an open-loop load (a fixed request rate, whatever the latency) sends a mix of
 * L1 hits, L2 hits (entries stored through the other replica) and misses (new keys) to both.
 * Redis is then killed (SIGKILL, then restarted), frozen (SIGSTOP, then SIGCONT) and made slow
 * (DEBUG SLEEP 0.5 over and over from another connection). The goal, per fault: no client error,
 * and a p99 latency under 50 ms over the requests sent from the fault until both replicas read
 * from L2 again (or under 8x the steady p99 before the fault, on a machine where that is more:
 * STEADY_FACTOR). One summary line per fault is printed (RELIABILITY.md).
 *
 * test/integration/redis-l2.test.ts keeps the single-proxy kill/freeze checks (in-process, closed
 * loop, L2 resuming within 2 s). This file adds the slow fault, two real replicas and an open-loop
 * load: a closed loop hides the requests stuck behind a stalled Redis, since its clients wait too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Agent, request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../src/fake-upstream/index.js';
import { until } from '../helpers/proxy.js';
import { redisKind, startRedis, type TestRedis } from '../helpers/redis.js';
import { startReplicas, stopReplicas, type Replica } from '../helpers/replicas.js';

const kind = await redisKind();
/** SIGKILL / SIGSTOP need a Redis this test spawned; DEBUG SLEEP needs one it configured. */
const canSignal = kind === 'process';
const canDebug = kind !== 'env';

/** Requests per second over both replicas: moderate, so that the figures measure Redis faults, not a saturated 2-core machine. */
const RATE = 240;
const GOAL_P99_MS = 50;
/**
 * On a machine whose steady p99 (before the fault) is already high, the goal scales with it: at
 * most this many times that p99. The goal was set where the steady p99 was 3-6 ms (RELIABILITY.md),
 * so there it is 50 ms exactly; on a VM where the same load has a steady p99 of 13-50 ms, 50 ms
 * measures the machine, not the fault. A stall behind Redis (a 500 ms DEBUG SLEEP, the 1 s connect
 * timeout, a queued command) still shows as long as the steady p99 is under a tenth of it.
 */
const STEADY_FACTOR = 8;
const HOT = ['/repos/octocat/hello-world', '/users/octocat', '/users/alice', '/users/bob', '/repos/octocat/spoon-knife'];
/** Keys stored in L2 through one replica before each fault, for L2 hits on the other. */
const L2_KEYS_PER_REPLICA = 250;

type Kind = 'l1' | 'l2' | 'miss';

interface Sample {
  at: number; // when the request was sent (performance.now())
  ms: number;
  status: number; // 0: no response
  kind: Kind;
  replica: number;
  /** Cache-Status says hit (L1 or L2). */
  hit: boolean;
}

const p99 = (xs: readonly number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0;
};

async function metricSum(adminUrl: string, name: string, labels: RegExp): Promise<number> {
  const text = await fetch(`${adminUrl}/metrics`).then(
    (r) => r.text(),
    () => '',
  );
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) || !labels.test(line)) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}
/** L2 lookups Redis answered (hit or miss). */
const l2Answered = (r: Replica): Promise<number> => metricSum(r.adminUrl, 'etagere_l2_lookups_total', /result="(hit|miss)"/);
const l2Skipped = (r: Replica): Promise<number> => metricSum(r.adminUrl, 'etagere_l2_lookups_total', /result="skipped"/);

describe.skipIf(!canDebug && !canSignal)('Redis faults under a steady load on 2 replicas', () => {
  let redis: TestRedis;
  let fake: FakeUpstream;
  let raw: Redis;
  let replicas: Replica[] = [];
  const agent = new Agent({ connections: 64, keepAliveTimeout: 30_000 });
  /** L2 keys not yet asked of each replica (stored through the other one). */
  const l2Keys: string[][] = [[], []];
  let missSeq = 0;
  let warmSeq = 0;
  let seq = 0;

  beforeAll(async () => {
    redis = await startRedis({ debugCommand: true });
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000_000 });
    raw = new Redis(redis.url, { maxRetriesPerRequest: 1, retryStrategy: (n) => Math.min(n * 50, 500) });
    raw.on('error', () => undefined); // it sees the kill too
    replicas = await startReplicas(2, { LOG_LEVEL: 'error', UPSTREAM_URL: fake.url, REDIS_URL: redis.url });
    // The hot paths in both L1s.
    for (const replica of replicas) for (const path of HOT) await (await request(replica.url + path, { dispatcher: agent })).body.dump();
  }, 90_000);

  /**
   * Stores fresh entries in L2 through each replica, for L2 hits on the other (before every
   * fault: a killed Redis forgets them, it persists nothing).
   */
  async function warmL2(): Promise<void> {
    const before = (await raw.keys('etagere:v1:*:e')).length;
    const jobs: Array<() => Promise<void>> = [];
    for (let via = 0; via < 2; via++) {
      l2Keys[1 - via] = [];
      for (let i = 0; i < L2_KEYS_PER_REPLICA; i++) {
        const path = `/repos/etagere-org/repo-0${String(10 + (i % 60))}?l2=${warmSeq++}`;
        l2Keys[1 - via]!.push(path);
        jobs.push(async () => {
          const res = await request(replicas[via]!.url + path, { dispatcher: agent });
          await res.body.dump();
          if (res.statusCode !== 200) throw new Error(`warming ${path}: ${res.statusCode}`);
        });
      }
    }
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let job = jobs.shift(); job !== undefined; job = jobs.shift()) await job();
      }),
    );
    await until(
      async () => (await raw.keys('etagere:v1:*:e')).length >= before + 2 * L2_KEYS_PER_REPLICA,
      10_000,
      'L2 writes of the warm-up',
    );
  }

  afterAll(async () => {
    await stopReplicas(replicas);
    raw?.disconnect();
    await agent.close();
    await fake?.close();
    await redis?.stop();
  });

  /** One request of the mix, to alternate replicas: a third L1 hits, a third L2 hits, a third misses. */
  async function one(samples: Sample[]): Promise<void> {
    const requestNumber = seq++;
    const replica = requestNumber % 2;
    const kind: Kind = (['l1', 'l2', 'miss'] as const)[Math.floor(requestNumber / 2) % 3]!;
    const path =
      kind === 'l1'
        ? HOT[requestNumber % HOT.length]!
        : kind === 'l2'
          ? l2Keys[replica]!.shift()
          : `/repos/etagere-org/repo-0${String(10 + (requestNumber % 60))}?miss=${missSeq++}`;
    if (path === undefined) throw new Error('ran out of warm L2 keys: raise L2_KEYS_PER_REPLICA');
    const at = performance.now();
    let status = 0;
    let hit = false;
    try {
      const res = await request(replicas[replica]!.url + path, { dispatcher: agent });
      status = res.statusCode;
      hit = /^etagere; hit/.test(String(res.headers['cache-status']));
      await res.body.text();
    } catch {
      status = 0;
    }
    samples.push({ at, ms: performance.now() - at, status, kind, replica, hit });
  }

  /**
   * Runs the open-loop load around `fault`, which injects a fault, holds it, ends it, and returns
   * once both replicas read from L2 again. Returns every sample and the fault window.
   */
  async function underLoad(fault: () => Promise<void>): Promise<{ samples: Sample[]; from: number; to: number }> {
    const samples: Sample[] = [];
    const pending = new Set<Promise<void>>();
    const crashes: unknown[] = [];
    const started = performance.now();
    let sent = 0;
    const ticker = setInterval(() => {
      const due = Math.floor(((performance.now() - started) / 1000) * RATE);
      for (; sent < due; sent++) {
        const inFlight = one(samples);
        pending.add(inFlight);
        inFlight.then(
          () => pending.delete(inFlight),
          (err: unknown) => (crashes.push(err), pending.delete(inFlight)),
        );
      }
    }, 4);
    /** Stops sending and waits for every request already sent to end. */
    const stopLoad = async (): Promise<void> => {
      clearInterval(ticker);
      await Promise.allSettled(pending);
    };
    let faultWindow: { from: number; to: number };
    try {
      await until(() => samples.length >= RATE / 2, 10_000, 'the load to settle'); // ~0.5 s of steady load first
      const from = performance.now();
      await fault();
      const to = performance.now();
      const after = samples.length;
      await until(() => samples.length >= after + RATE / 4, 10_000, 'some load after the fault');
      faultWindow = { from, to };
    } catch (err) {
      await stopLoad();
      // A crash of the load itself is reported in place of the error it may have caused.
      throw crashes.length > 0 ? crashes[0] : err;
    }
    await stopLoad();
    if (crashes.length > 0) throw crashes[0];
    return { samples, ...faultWindow };
  }

  /** Resolves once every replica has had an L2 lookup answered by Redis after this call. */
  async function l2Back(): Promise<void> {
    const base = await Promise.all(replicas.map(l2Answered));
    await until(
      async () => (await Promise.all(replicas.map(l2Answered))).every((v, i) => v > base[i]!),
      10_000,
      'both replicas to read from L2 again',
    );
  }

  interface Figures {
    n: number;
    errors: number;
    p99: number;
    /** p99 of the requests sent before the fault (the same load, Redis healthy). */
    p99Before: number;
    /** Share of the L2 requests sent before the fault that were answered from L2 (the mix is real). */
    l2Before: number;
  }

  function report(name: string, run: { samples: Sample[]; from: number; to: number }, skipped: number): Figures {
    const during = run.samples.filter((s) => s.at >= run.from && s.at <= run.to);
    const before = run.samples.filter((s) => s.at < run.from);
    const errors = run.samples.filter((s) => s.status !== 200);
    const ms = during.map((s) => s.ms);
    const byKind = (k: Kind): string => `${during.filter((s) => s.kind === k).length} ${k}`;
    const l2 = before.filter((s) => s.kind === 'l2');
    const fig = {
      n: during.length,
      errors: errors.length,
      p99: p99(ms),
      p99Before: p99(before.map((s) => s.ms)),
      l2Before: l2.filter((s) => s.hit).length / Math.max(1, l2.length),
    };
    console.log(
      `redis ${name}: ${fig.n} requests during the fault (${Math.round(run.to - run.from)} ms, ${byKind('l1')} / ${byKind('l2')} / ${byKind('miss')}, 2 replicas, ${RATE} req/s), ` +
        `${fig.errors} errors (of ${run.samples.length} in the run), p99 ${fig.p99.toFixed(1)} ms (max ${Math.max(...ms).toFixed(1)} ms; ` +
        `before the fault ${fig.p99Before.toFixed(1)} ms, L2 requests answered from L2 ${l2.filter((s) => s.hit).length}/${l2.length}), ${skipped} L2 lookups skipped`,
    );
    if (fig.errors > 0) console.log(JSON.stringify(errors.slice(0, 5)));
    return fig;
  }

  function expectGoal(fig: Figures): void {
    expect(fig.l2Before).toBeGreaterThanOrEqual(0.9);
    expect(fig.n).toBeGreaterThan(RATE);
    expect(fig.errors).toBe(0);
    expect(fig.p99).toBeLessThan(Math.max(GOAL_P99_MS, STEADY_FACTOR * fig.p99Before));
  }

  const skippedNow = async (): Promise<number> => (await Promise.all(replicas.map(l2Skipped))).reduce((a, b) => a + b, 0);

  it.skipIf(!canSignal)(
    'killed (SIGKILL) mid-load, then restarted: no client error, p99 under 50 ms',
    async () => {
      await warmL2();
      const skipped0 = await skippedNow();
      const run = await underLoad(async () => {
        redis.signal('SIGKILL');
        // Held ~2 s: the outage lasts while the load goes on (not synchronisation).
        await new Promise((r) => setTimeout(r, 2_000));
        await redis.restart();
        await l2Back();
      });
      const fig = report('killed (SIGKILL ~2 s, restart)', run, (await skippedNow()) - skipped0);
      expectGoal(fig);
    },
    30_000,
  );

  it.skipIf(!canSignal)(
    'frozen (SIGSTOP ~2 s, then SIGCONT) mid-load: no client error, p99 under 50 ms',
    async () => {
      await warmL2();
      const skipped0 = await skippedNow();
      const run = await underLoad(async () => {
        redis.signal('SIGSTOP');
        try {
          await new Promise((r) => setTimeout(r, 2_000));
        } finally {
          redis.signal('SIGCONT');
        }
        await l2Back();
      });
      const fig = report('frozen (SIGSTOP ~2 s, SIGCONT)', run, (await skippedNow()) - skipped0);
      expectGoal(fig);
    },
    30_000,
  );

  it.skipIf(!canDebug)(
    'slow (DEBUG SLEEP 0.5, over and over for ~2.5 s) mid-load: no client error, p99 under 50 ms',
    async () => {
      await warmL2();
      const skipped0 = await skippedNow();
      const sleeper = new Redis(redis.url, { maxRetriesPerRequest: 1, commandTimeout: 5_000 });
      try {
        const run = await underLoad(async () => {
          // Each DEBUG SLEEP blocks the whole server for 0.5 s; the next one is sent as soon as it answers.
          for (let i = 0; i < 5; i++) expect(await sleeper.call('DEBUG', 'SLEEP', '0.5')).toBe('OK');
          await l2Back();
        });
        const fig = report('slow (DEBUG SLEEP 0.5 x5)', run, (await skippedNow()) - skipped0);
        expectGoal(fig);
      } finally {
        sleeper.disconnect();
      }
    },
    30_000,
  );
});
