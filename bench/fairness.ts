/**
 * Points shared fairly between consumers, and charged to whoever spends them: one pool token paced
 * at `points` a minute (the fake enforces the same budget), an abuser that re-requests its own
 * cached entries with `Cache-Control: max-age=0` in `loops` loops (each forced revalidation goes
 * upstream as a conditional request and is answered 304: free of quota, not of points), and a
 * polite consumer that sends one miss every `intervalMs` (`misses` in all).
 *
 *   npm run bench:quota -- --fairness [--budget N] [--interval-ms N] [--misses N] [--queue-timeout-ms N] [--smoke] [--json FILE]
 *
 * Two runs side by side, each with its own fake and proxy:
 * - capped: the abuser has `max_per_hour: 10`. Goal: it makes at most 11 upstream requests (its
 *   first fetches included) while the polite consumer's misses go on.
 * - uncapped: the abuser has no cap. Goal: the polite consumer gets at least 9 of 10 misses
 *   answered 200 (the proportion for another `misses`).
 *
 * Defaults are the full-size scenario (60 points a minute, a miss every 3 s: a third of the points).
 * Time is not compressed: the fake and the proxy count real minutes and real 10 s windows, so a run
 * takes `misses` x `intervalMs` plus the waits of the last misses (about 45 s by default). The
 * smoke run (--smoke) keeps the proportions at 10 x the rate: 600 points, a miss every 300 ms.
 */
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { startApp, type App } from '../src/main/app.js';
import { parseConfig } from '../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../fake-github/index.js';
import { parseTokenSpec } from '../fake-github/tokens.js';
import { createLogger } from '../src/platform/log/logger.js';

export interface FairnessSettings {
  /** Points a minute of the pool token (the proxy's pool.points_per_minute and the fake's limit). Default 60. */
  points: number;
  /** The polite consumer's cadence. Default 3,000 ms. */
  intervalMs: number;
  /** The polite consumer's misses. Default 10. */
  misses: number;
  /** The abuser's loops of forced revalidations, each on an entry of its own. Default 4. */
  loops: number;
  /** The capped run's max_per_hour. Default 10. */
  cap: number;
  /** pool.queue_timeout_ms. Default 10,000 (the proxy's default). */
  queueTimeoutMs: number;
}

export const FAIRNESS_DEFAULTS: FairnessSettings = { points: 60, intervalMs: 3_000, misses: 10, loops: 4, cap: 10, queueTimeoutMs: 10_000 };
/** The same proportions at 10 x the rate. */
export const FAIRNESS_SMOKE: Partial<FairnessSettings> = { points: 600, intervalMs: 300 };

export interface FairnessRun {
  name: string;
  /** The abuser's max_per_hour (null: none). */
  cap: number | null;
  /** Upstream requests the fake saw for the abuser's entries (its first fetches included). */
  abuserUpstream: number;
  /** The abuser's answers by status (its loops' requests, not the first fetches). */
  abuserStatuses: Record<string, number>;
  /** The polite consumer's answers by status, in order. */
  politeStatuses: number[];
  /** The polite consumer's slowest answer (ms). */
  politeMaxMs: number;
  /** Secondary-limit refusals of the fake (the proxy kept under the points when 0). */
  fakeRefused: number;
  seconds: number;
}

export interface FairnessResults {
  settings: FairnessSettings;
  runs: FairnessRun[];
}

const TOKEN = 'fairness_bench_token';
const KEYS = { abuser: 'fairness_bench_key_abuser', polite: 'fairness_bench_key_polite' };
const abuserPath = (loop: number): string => `/repos/etagere-org/repo-${String(loop + 1).padStart(3, '0')}`;
const politePath = (miss: number): string => `/repos/etagere-org/repo-${String(500 + miss)}`;

async function startRig(settings: FairnessSettings, cap: number | null): Promise<{ fake: FakeUpstream; app: App }> {
  const fake = await startFakeUpstream({
    orgRepoCount: 1000,
    tokens: parseTokenSpec(`${TOKEN}@alice:public_repo`),
    enforcePoints: true,
    pointsPerMinute: settings.points,
  });
  const config = parseConfig({
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: 'silent' },
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { policy: 'max-age' } }],
    pool: { tokens: [{ name: 'only', value: TOKEN }], points_per_minute: settings.points, queue_timeout_ms: settings.queueTimeoutMs },
    consumers: {
      enabled: true,
      keys: [
        { name: 'abuser', value: KEYS.abuser, max_per_hour: cap },
        { name: 'polite', value: KEYS.polite },
      ],
    },
  });
  const app = await startApp(config, { logger: createLogger({ level: 'silent' }) });
  return { fake, app };
}

async function get(url: string, headers: Record<string, string>): Promise<number> {
  const res = await request(url, { headers });
  await res.body.dump();
  return res.statusCode;
}

async function fakeRefused(fake: FakeUpstream): Promise<number> {
  const res = await request(`${fake.url}/__fake/secondary`);
  return ((await res.body.json()) as { points: { refused: number } }).points.refused;
}

/** One run: the abuser caches its entries, then forces their revalidation in loops while the polite consumer misses on schedule. */
export async function runFairness(settings: FairnessSettings, cap: number | null): Promise<FairnessRun> {
  const { fake, app } = await startRig(settings, cap);
  const started = performance.now();
  try {
    const abuser = { 'x-etagere-key': KEYS.abuser };
    for (let loop = 0; loop < settings.loops; loop++) await get(`${app.url}${abuserPath(loop)}`, abuser);
    let done = false;
    const abuserStatuses: Record<string, number> = {};
    const loops = Array.from({ length: settings.loops }, async (_, loop) => {
      while (!done) {
        const status = await get(`${app.url}${abuserPath(loop)}`, { ...abuser, 'cache-control': 'max-age=0' });
        abuserStatuses[status] = (abuserStatuses[status] ?? 0) + 1;
      }
    });
    const polite: Array<Promise<{ status: number; ms: number }>> = [];
    for (let miss = 0; miss < settings.misses; miss++) {
      if (miss > 0) await sleep(settings.intervalMs);
      const sent = performance.now();
      polite.push(
        get(`${app.url}${politePath(miss)}`, { 'x-etagere-key': KEYS.polite }).then((status) => ({ status, ms: performance.now() - sent })),
      );
    }
    const answers = await Promise.all(polite);
    done = true;
    await Promise.all(loops);
    const byPath = fake.stats().byPath;
    let abuserUpstream = 0;
    for (let loop = 0; loop < settings.loops; loop++) abuserUpstream += byPath[abuserPath(loop)] ?? 0;
    return {
      name: cap === null ? 'uncapped abuser' : `abuser capped at max_per_hour ${cap}`,
      cap,
      abuserUpstream,
      abuserStatuses,
      politeStatuses: answers.map((answer) => answer.status),
      politeMaxMs: Math.max(...answers.map((answer) => answer.ms)),
      fakeRefused: await fakeRefused(fake),
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await app.close();
    await fake.close();
  }
}

export async function runFairnessBench(options: Partial<FairnessSettings> = {}): Promise<FairnessResults> {
  const settings = { ...FAIRNESS_DEFAULTS, ...options };
  const runs = await Promise.all([runFairness(settings, settings.cap), runFairness(settings, null)]);
  return { settings, runs };
}

/** The polite consumer's misses that must be answered 200: 9 of 10 (the proportion for another count). */
export const servedGoal = (misses: number): number => Math.ceil((misses * 9) / 10);

export function fairnessGoalFailures(results: FairnessResults): string[] {
  const failures: string[] = [];
  for (const run of results.runs) {
    if (run.cap !== null && run.abuserUpstream > run.cap + 1)
      failures.push(`${run.name}: ${run.abuserUpstream} upstream requests; goal <= ${run.cap + 1}`);
    const served = run.politeStatuses.filter((status) => status === 200).length;
    if (run.cap === null && served < servedGoal(run.politeStatuses.length))
      failures.push(
        `${run.name}: the polite consumer got ${served} of ${run.politeStatuses.length} answered 200; goal >= ${servedGoal(run.politeStatuses.length)}`,
      );
    if (run.fakeRefused > 0)
      failures.push(`${run.name}: the fake refused ${run.fakeRefused} requests for points (pacing let them through)`);
  }
  return failures;
}

export function formatFairness(results: FairnessResults): string {
  const { settings } = results;
  const lines = [
    `fairness: one token at ${settings.points} points a minute; ${settings.loops} loops of forced revalidations (max-age=0) from one consumer; ` +
      `another sends a miss every ${settings.intervalMs} ms (${settings.misses} in all); queue_timeout_ms ${settings.queueTimeoutMs}`,
  ];
  for (const run of results.runs) {
    const served = run.politeStatuses.filter((status) => status === 200).length;
    const statuses = Object.entries(run.abuserStatuses)
      .map(([status, count]) => `${status}: ${count}`)
      .join(', ');
    lines.push(
      `  ${run.name}: abuser ${run.abuserUpstream} upstream requests (answers ${statuses}); ` +
        `polite ${served}/${run.politeStatuses.length} answered 200 [${run.politeStatuses.join(' ')}], slowest ${run.politeMaxMs.toFixed(0)} ms; ` +
        `fake refused ${run.fakeRefused}; ${run.seconds.toFixed(1)} s`,
    );
  }
  const capped = results.runs.find((run) => run.cap !== null);
  const uncapped = results.runs.find((run) => run.cap === null);
  if (capped !== undefined)
    lines.push(`  goal: the capped abuser makes <= ${settings.cap + 1} upstream requests in the hour: ${capped.abuserUpstream}`);
  if (uncapped !== undefined) {
    const served = uncapped.politeStatuses.filter((status) => status === 200).length;
    lines.push(
      `  goal: with no cap, the other consumer gets >= ${servedGoal(uncapped.politeStatuses.length)} of ${uncapped.politeStatuses.length} misses answered 200: ${served}`,
    );
  }
  return lines.join('\n');
}

type Flags = Readonly<Record<string, string | boolean | undefined>>;

/** `npm run bench:quota -- --fairness`: prints both goals; exits 1 when one is not met. */
export function runFairnessCli(values: Flags): void {
  const opts: Partial<FairnessSettings> = values.smoke === true ? { ...FAIRNESS_SMOKE } : {};
  const number = (name: string): number | undefined => (typeof values[name] === 'string' ? Number(values[name]) : undefined);
  const points = number('budget');
  if (points !== undefined) opts.points = points;
  const intervalMs = number('interval-ms');
  if (intervalMs !== undefined) opts.intervalMs = intervalMs;
  const misses = number('misses');
  if (misses !== undefined) opts.misses = misses;
  const queueTimeoutMs = number('queue-timeout-ms');
  if (queueTimeoutMs !== undefined) opts.queueTimeoutMs = queueTimeoutMs;
  runFairnessBench(opts).then(
    (results) => {
      if (typeof values.json === 'string') writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
      const failures = fairnessGoalFailures(results);
      const verdict = failures.length > 0 ? `fairness: goals not met:\n  ${failures.join('\n  ')}\n` : 'fairness: goals met\n';
      process.stdout.write(`${formatFairness(results)}\n${verdict}`, () => process.exit(failures.length > 0 ? 1 : 0));
    },
    (err: unknown) => {
      process.stderr.write(`fairness: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
