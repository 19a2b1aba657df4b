/**
 * Hardening: Redis faults under a steady load. Two `etagere serve` processes share one Redis and
 * one fake upstream; an open-loop load (a fixed request rate, whatever the latency) sends a mix of
 * L1 hits, L2 hits (entries stored through the other replica) and misses (new keys) to both.
 * Redis is then killed (SIGKILL, then restarted), frozen (SIGSTOP, then SIGCONT) and made slow
 * (DEBUG SLEEP 0.5 over and over from another connection). Per fault, no client error, and the
 * two properties that keep a Redis fault from becoming a client's wait, with bounds taken from the
 * replicas' configuration (REDIS_SETTINGS) and a fixed margin, never from a latency measured here:
 *   - a request sent before a replica has seen the fault (in flight at it) finishes within
 *     2 x command_timeout_ms + MARGIN_MS: it waits on Redis at most for its lookup and its lock;
 *   - once both replicas report Redis down, no request waits on Redis: the commands they still
 *     send are at most the breaker's trials (one per breaker_open_ms), and every other L2 lookup
 *     is skipped (etagere_redis_operations_total{op="get",result="skipped"}).
 * One summary line per fault is printed, with the p99 and max latency (RELIABILITY.md).
 *
 * test/integration/redis-l2.test.ts checks the same properties for one in-process proxy (closed
 * loop, L2 resuming within 2 s). This file adds the slow fault, two real replicas and an open-loop
 * load: a closed loop hides the requests stuck behind a stalled Redis, since its clients wait too.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Agent, request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { until } from '../helpers/proxy.js';
import { redisKind, startRedis, type TestRedis } from '../helpers/redis.js';
import { startReplicas, stopReplicas, type Replica } from '../helpers/replicas.js';

const kind = await redisKind();
/** SIGKILL / SIGSTOP need a Redis this test spawned; DEBUG SLEEP needs one it configured. */
const canSignal = kind === 'process';
const canDebug = kind !== 'env';

/** Requests per second over both replicas: moderate, so that the figures measure Redis faults, not a saturated 2-core machine. */
const RATE = 240;
/** The replicas' Redis settings (their config file; these are the defaults): the bounds below follow from them. */
const REDIS_SETTINGS = { command_timeout_ms: 100, lookup_timeout_ms: 20, breaker_failures: 3, breaker_open_ms: 1_000 } as const;
/**
 * What a request may take beside its waits on Redis: the replica's own work, the fake upstream's
 * answer and the load's client, on a 2-core machine. A fixed figure, not a measured one.
 */
const MARGIN_MS = 200;
/**
 * A request waits on Redis at most twice, each time at most command_timeout_ms: its L2 lookup, and
 * the single-flight lock when the lookup was answered (docs/redis.md). 400 ms here: a request stuck
 * behind a 500 ms DEBUG SLEEP, or the 1 s connect timeout, fails it.
 */
const IN_FLIGHT_BOUND_MS = 2 * REDIS_SETTINGS.command_timeout_ms + MARGIN_MS;
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

/** What a replica has asked of Redis so far. */
interface RedisCounts {
  /** Commands sent to Redis, whatever op, answered or not. */
  sent: number;
  /** L2 lookups that went on without sending anything (connection down or breaker open). */
  skippedLookups: number;
}

async function redisCounts(replica: Replica): Promise<RedisCounts> {
  const [sent, skippedLookups] = await Promise.all([
    metricSum(replica.adminUrl, 'etagere_redis_operations_total', /result="(ok|error)"/),
    metricSum(replica.adminUrl, 'etagere_redis_operations_total', /op="get",result="skipped"/),
  ]);
  return { sent, skippedLookups };
}

/** The replica's own view: connected and its breaker closed (/admin/status). */
async function redisUp(replica: Replica): Promise<boolean> {
  const status = (await (await fetch(`${replica.adminUrl}/admin/status`)).json()) as { redis: { up: boolean } };
  return status.redis.up;
}

/** Trials the breaker lets through in `ms` while Redis stays down: one per breaker_open_ms. */
const breakerTrials = (ms: number): number => 1 + Math.floor(ms / REDIS_SETTINGS.breaker_open_ms);

/** The part of a fault during which both replicas report Redis down, and what each sent to Redis meanwhile. */
interface DownWindow {
  /** When both replicas reported Redis down (performance.now()). */
  seen: number;
  /** Counting starts here: once every command sent before the breakers opened has timed out. */
  from: number;
  to: number;
  /** How long the counts below cover (from before the first read to after the second). */
  countedMs: number;
  before: RedisCounts[];
  after: RedisCounts[];
}

interface FaultRun {
  samples: Sample[];
  /** The fault's injection, and the moment both replicas read from L2 again. */
  from: number;
  to: number;
  down: DownWindow;
}

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
  let configDir: string | undefined;

  beforeAll(async () => {
    redis = await startRedis({ debugCommand: true });
    fake = await startFakeUpstream({ anonymousLimit: 1_000_000_000 });
    raw = new Redis(redis.url, { maxRetriesPerRequest: 1, retryStrategy: (n) => Math.min(n * 50, 500) });
    raw.on('error', () => undefined); // it sees the kill too
    configDir = mkdtempSync(join(tmpdir(), 'etagere-redis-faults-'));
    const config = join(configDir, 'etagere.yaml');
    writeFileSync(config, JSON.stringify({ redis: REDIS_SETTINGS })); // JSON is YAML
    replicas = await startReplicas(2, { LOG_LEVEL: 'error', UPSTREAM_URL: fake.url, REDIS_URL: redis.url, ETAGERE_CONFIG: config });
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
    if (configDir !== undefined) rmSync(configDir, { recursive: true, force: true });
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
   * its down window once both replicas read from L2 again. Returns every sample and the fault window.
   */
  async function underLoad(fault: () => Promise<DownWindow>): Promise<FaultRun> {
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
    let window: { from: number; to: number; down: DownWindow };
    try {
      await until(() => samples.length >= RATE / 2, 10_000, 'the load to settle'); // ~0.5 s of steady load first
      const from = performance.now();
      const down = await fault();
      const to = performance.now();
      const after = samples.length;
      await until(() => samples.length >= after + RATE / 4, 10_000, 'some load after the fault');
      window = { from, to, down };
    } catch (err) {
      await stopLoad();
      // A crash of the load itself is reported in place of the error it may have caused.
      throw crashes.length > 0 ? crashes[0] : err;
    }
    await stopLoad();
    if (crashes.length > 0) throw crashes[0];
    return { samples, ...window };
  }

  /**
   * Called by a fault once injected: waits until both replicas report Redis down, then lets every
   * command sent before their breakers opened time out (command_timeout_ms, and the margin for a
   * busy event loop: a duration of the configuration, spent while the fault is held anyway), then
   * counts what each replica sends to Redis until `end` resolves (just before the fault ends).
   */
  async function whileDown(end: () => Promise<void>): Promise<DownWindow> {
    await until(async () => (await Promise.all(replicas.map(redisUp))).every((up) => !up), 10_000, 'both replicas to report Redis down');
    const seen = performance.now();
    await new Promise((r) => setTimeout(r, REDIS_SETTINGS.command_timeout_ms + MARGIN_MS));
    const countFrom = performance.now();
    const before = await Promise.all(replicas.map(redisCounts));
    const from = performance.now();
    await end();
    const to = performance.now();
    const after = await Promise.all(replicas.map(redisCounts));
    return { seen, from, to, countedMs: performance.now() - countFrom, before, after };
  }

  /** Holds a fault until `ms` after `since` (the outage lasts while the load goes on: not synchronisation). */
  const holdUntil = (since: number, ms: number): Promise<void> =>
    new Promise((r) => setTimeout(r, Math.max(0, since + ms - performance.now())));

  /** Resolves once every replica has had an L2 lookup answered by Redis after this call. */
  async function l2Back(): Promise<void> {
    const base = await Promise.all(replicas.map(l2Answered));
    await until(
      async () => (await Promise.all(replicas.map(l2Answered))).every((v, i) => v > base[i]!),
      10_000,
      'both replicas to read from L2 again',
    );
  }

  interface ReplicaFigures {
    /** Commands it sent to Redis while it reported Redis down, and the breaker trials it may send meanwhile. */
    sent: number;
    trials: number;
    /** Its L2 lookups that skipped Redis then, and the requests it was sent then that look up L2. */
    skipped: number;
    lookups: number;
  }

  interface Figures {
    n: number;
    errors: number;
    p99: number;
    max: number;
    /** Requests sent before both replicas reported Redis down and answered after the fault began, and the slowest of them. */
    inFlight: number;
    inFlightMax: number;
    /** From the fault's injection until both replicas reported Redis down. */
    seenAfter: number;
    replicas: ReplicaFigures[];
    /** Share of the L2 requests sent before the fault that were answered from L2 (the mix is real). */
    l2Before: number;
  }

  function figures(run: FaultRun): Figures {
    const { down } = run;
    const during = run.samples.filter((s) => s.at >= run.from && s.at <= run.to);
    const ms = during.map((s) => s.ms);
    const inFlight = run.samples.filter((s) => s.at < down.seen && s.at + s.ms >= run.from).map((s) => s.ms);
    const l2 = run.samples.filter((s) => s.at < run.from && s.kind === 'l2');
    return {
      n: during.length,
      errors: run.samples.filter((s) => s.status !== 200).length,
      p99: p99(ms),
      max: Math.max(0, ...ms),
      inFlight: inFlight.length,
      inFlightMax: Math.max(0, ...inFlight),
      seenAfter: down.seen - run.from,
      replicas: replicas.map((_, index) => ({
        sent: down.after[index]!.sent - down.before[index]!.sent,
        trials: breakerTrials(down.countedMs),
        skipped: down.after[index]!.skippedLookups - down.before[index]!.skippedLookups,
        // Sent early enough in the window for the lookup to be made in it.
        lookups: run.samples.filter((s) => s.replica === index && s.kind !== 'l1' && s.at >= down.from && s.at <= down.to - MARGIN_MS)
          .length,
      })),
      l2Before: l2.filter((s) => s.hit).length / Math.max(1, l2.length),
    };
  }

  function report(name: string, run: FaultRun): Figures {
    const fig = figures(run);
    const byKind = (k: Kind): string => `${run.samples.filter((s) => s.at >= run.from && s.at <= run.to && s.kind === k).length} ${k}`;
    const down = fig.replicas
      .map((r, i) => `replica ${i}: ${r.sent} sent to Redis (trials allowed ${r.trials}), ${r.skipped} lookups skipped of ${r.lookups}+`)
      .join('; ');
    console.log(
      `redis ${name}: ${fig.n} requests during the fault (${Math.round(run.to - run.from)} ms, ${byKind('l1')} / ${byKind('l2')} / ${byKind('miss')}, 2 replicas, ${RATE} req/s), ` +
        `${fig.errors} errors (of ${run.samples.length} in the run), p99 ${fig.p99.toFixed(1)} ms (max ${fig.max.toFixed(1)} ms); ` +
        `${fig.inFlight} in flight when it began, slowest ${fig.inFlightMax.toFixed(1)} ms (bound ${IN_FLIGHT_BOUND_MS}); ` +
        `seen down after ${Math.round(fig.seenAfter)} ms, then over ${Math.round(run.down.to - run.down.from)} ms ${down}`,
    );
    if (fig.errors > 0) console.log(JSON.stringify(run.samples.filter((s) => s.status !== 200).slice(0, 5)));
    return fig;
  }

  function expectProperties(fig: Figures): void {
    expect(fig.l2Before, 'L2 requests answered from L2 before the fault').toBeGreaterThanOrEqual(0.9);
    expect(fig.n, 'requests during the fault').toBeGreaterThan(RATE);
    expect(fig.errors, 'client errors').toBe(0);
    // The breaker opens once breaker_failures commands sent after the fault have timed out, each
    // within command_timeout_ms; until then requests may wait on Redis, each within the patience.
    expect(fig.seenAfter, 'ms from the fault until both replicas report Redis down').toBeLessThan(IN_FLIGHT_BOUND_MS);
    expect(fig.inFlightMax, 'ms taken by the slowest request in flight at the fault').toBeLessThan(IN_FLIGHT_BOUND_MS);
    // After it: no request waits on Redis.
    fig.replicas.forEach((replica, index) => {
      expect(replica.lookups, `requests to replica ${index} while it reported Redis down`).toBeGreaterThan(0);
      expect(replica.sent, `commands replica ${index} sent to Redis while it reported it down`).toBeLessThanOrEqual(replica.trials);
      expect(replica.skipped, `L2 lookups replica ${index} made without Redis then`).toBeGreaterThanOrEqual(
        replica.lookups - replica.trials,
      );
    });
  }

  it.skipIf(!canSignal)(
    'killed (SIGKILL) mid-load, then restarted: no client error, no request waits on the dead Redis',
    async () => {
      await warmL2();
      const run = await underLoad(async () => {
        redis.signal('SIGKILL');
        const killed = performance.now();
        const down = await whileDown(() => holdUntil(killed, 2_000));
        await redis.restart();
        await l2Back();
        return down;
      });
      expectProperties(report('killed (SIGKILL ~2 s, restart)', run));
    },
    30_000,
  );

  it.skipIf(!canSignal)(
    'frozen (SIGSTOP ~2 s, then SIGCONT) mid-load: no client error, no request waits on the frozen Redis',
    async () => {
      await warmL2();
      const run = await underLoad(async () => {
        redis.signal('SIGSTOP');
        const frozen = performance.now();
        let down: DownWindow;
        try {
          down = await whileDown(() => holdUntil(frozen, 2_000));
        } finally {
          redis.signal('SIGCONT');
        }
        await l2Back();
        return down;
      });
      expectProperties(report('frozen (SIGSTOP ~2 s, SIGCONT)', run));
    },
    30_000,
  );

  it.skipIf(!canDebug)(
    'slow (DEBUG SLEEP 0.5, over and over for ~2.5 s) mid-load: no client error, no request waits out a sleep',
    async () => {
      await warmL2();
      const sleeper = new Redis(redis.url, { maxRetriesPerRequest: 1, commandTimeout: 5_000 });
      try {
        const run = await underLoad(async () => {
          // Each DEBUG SLEEP blocks the whole server for 0.5 s; the next one is sent as soon as it answers.
          // The counting ends while the last one is still sleeping.
          let lastSent!: () => void;
          const last = new Promise<void>((resolve) => (lastSent = resolve));
          const sleeps = (async () => {
            for (let i = 0; i < 5; i++) {
              const sleep = sleeper.call('DEBUG', 'SLEEP', '0.5');
              if (i === 4) lastSent();
              expect(await sleep).toBe('OK');
            }
          })();
          const down = await whileDown(() => last);
          await sleeps;
          await l2Back();
          return down;
        });
        expectProperties(report('slow (DEBUG SLEEP 0.5 x5)', run));
      } finally {
        sleeper.disconnect();
      }
    },
    30_000,
  );
});
