/**
 * Pacing under GitHub's secondary limits: the same load through the proxy with pacing on
 * (pool.points_per_minute = the fake's limit) and effectively off (a budget no load reaches),
 * against a fake upstream that enforces the points (enforcePoints: a GET is 1 point; beyond the
 * minute's points, 403 with retry-after).
 *
 *   npm run bench:quota -- --pacing [--budget N] [--seconds N] [--smoke] [--json FILE]
 *
 * Workload: one pool token; `concurrency` clients ask, as fast as they are answered, for distinct
 * repositories (policy revalidate: each request is an upstream request, a 200 or a 304, each 1
 * point). A 429 from the proxy (paced) makes that client wait 100 ms.
 *
 * Goals (pacing on): no secondary-limit answer from the fake, and throughput of at least 95 % of the
 * allowed points: the points the fake accepted over the last full minute of the run (from second
 * `seconds - 62.5` to `seconds - 2.5`, when the first minute's burst is long gone) against the budget.
 * Pacing off: the fake's refusals are reported (the same load trips them).
 * Time is not compressed: the fake and the proxy both count real minutes, so a run takes
 * `seconds` (default 125) with pacing on, plus 20 s with it off.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { startApp } from '../src/main/app.js';
import { parseConfig, resolveSecrets } from '../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../fake-github/index.js';
import { parseTokenSpec } from '../fake-github/tokens.js';
import { createLogger } from '../src/platform/log/logger.js';

/** Points a token may send a minute in a run that is not paced: no load here reaches it. Benches that compress time, or whose load is not about pacing, use it too. */
export const UNPACED = 1_000_000;

export interface PacingSettings {
  /** Points per minute of the fake and of the paced proxy. Default 600. */
  budget: number;
  /** Length of the paced run. Default 125 (at least 65: a minute is measured). */
  seconds: number;
  /** Length of the unpaced run. Default 20. */
  offSeconds: number;
  /** Clients at once. Default 16. */
  concurrency: number;
}

export interface PacingRun {
  name: string;
  paced: boolean;
  seconds: number;
  /** Points the fake accepted during the run, and those of the measured minute (paced run only). */
  accepted: number;
  measured: number | null;
  /** Secondary-limit answers of the fake (403 for points). */
  refused: number;
  /** Client answers by status. */
  statuses: Record<string, number>;
}

export interface PacingResults {
  budget: number;
  runs: PacingRun[];
}

const TOKEN = 'pacing_bench_token';
const DEFAULTS: PacingSettings = { budget: 600, seconds: 125, offSeconds: 20, concurrency: 16 };
export const PACING_SMOKE: Partial<PacingSettings> = { budget: 300, seconds: 65, offSeconds: 10, concurrency: 8 };

async function fakePoints(fake: FakeUpstream): Promise<{ rest: number; refused: number }> {
  const res = await request(`${fake.url}/__fake/secondary`);
  const body = (await res.body.json()) as { points: { rest: number; refused: number } };
  return body.points;
}

async function run(settings: PacingSettings, paced: boolean): Promise<PacingRun> {
  const seconds = paced ? settings.seconds : settings.offSeconds;
  const repos = 2000;
  const fake = await startFakeUpstream({
    orgRepoCount: repos,
    tokens: parseTokenSpec(`${TOKEN}@alice:public_repo`),
    tokenLimit: 1_000_000_000,
    enforcePoints: true,
    pointsPerMinute: settings.budget,
  });
  const raw = resolveSecrets(
    {
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      log: { level: 'silent' },
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { policy: 'revalidate' } }],
      pool: { tokens: [{ name: 'bench', value: TOKEN }], points_per_minute: paced ? settings.budget : UNPACED },
    },
    {},
  );
  const app = await startApp(parseConfig(raw), { logger: createLogger({ level: 'silent' }), watchTokensFile: false });
  const statuses: Record<string, number> = {};
  const start = Date.now();
  const end = start + seconds * 1000;
  let next = 0;
  let measuredFrom: number | undefined;
  let measuredTo: number | undefined;
  const marks = paced
    ? (async () => {
        await sleep(end - 62_500 - Date.now());
        measuredFrom = (await fakePoints(fake)).rest;
        await sleep(end - 2_500 - Date.now());
        measuredTo = (await fakePoints(fake)).rest;
      })()
    : Promise.resolve();
  const client = async (): Promise<void> => {
    while (Date.now() < end) {
      const repo = 1 + (next++ % repos);
      const res = await request(`${app.url}/repos/etagere-org/repo-${String(repo).padStart(3, '0')}`);
      await res.body.dump();
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      if (res.statusCode === 429) await sleep(100);
    }
  };
  await Promise.all([...Array.from({ length: settings.concurrency }, client), marks]);
  const points = await fakePoints(fake);
  await app.close();
  await fake.close();
  return {
    name: paced ? `pacing on (${settings.budget} points a minute)` : 'pacing off (points_per_minute 1,000,000)',
    paced,
    seconds,
    accepted: points.rest,
    measured: measuredFrom === undefined || measuredTo === undefined ? null : measuredTo - measuredFrom,
    refused: points.refused,
    statuses,
  };
}

export async function runPacingBench(opts: Partial<PacingSettings> = {}): Promise<PacingResults> {
  const settings = { ...DEFAULTS, ...opts };
  if (settings.seconds < 65) throw new RangeError('--seconds: at least 65 (a whole minute is measured)');
  const on = await run(settings, true);
  const off = await run(settings, false);
  return { budget: settings.budget, runs: [on, off] };
}

/** Pacing on: no refusal, and the measured minute carries at least 95 % of the budget; off: it trips them. */
export function pacingGoalFailures(results: PacingResults): string[] {
  const out: string[] = [];
  for (const runResult of results.runs) {
    if (runResult.paced) {
      if (runResult.refused > 0) out.push(`${runResult.name}: ${runResult.refused} secondary-limit answers; goal 0`);
      const share = (runResult.measured ?? 0) / results.budget;
      if (share < 0.95)
        out.push(`${runResult.name}: ${(share * 100).toFixed(1)} % of the allowed points in the measured minute; goal >= 95 %`);
    } else if (runResult.refused === 0) {
      out.push(`${runResult.name}: no secondary-limit answer: the load does not show what pacing prevents`);
    }
  }
  return out;
}

export function formatPacing(results: PacingResults): string {
  const lines = [`pacing: one token, the fake enforcing ${results.budget} points a minute (GET = 1 point)`];
  for (const runResult of results.runs) {
    const measured =
      runResult.measured === null
        ? ''
        : `, last full minute ${runResult.measured} = ${((runResult.measured / results.budget) * 100).toFixed(1)} % of the budget`;
    const statuses = Object.entries(runResult.statuses)
      .map(([status, count]) => `${status}: ${count}`)
      .join(', ');
    lines.push(
      `  ${runResult.name}, ${runResult.seconds} s: ${runResult.accepted} points accepted${measured}; ` +
        `${runResult.refused} secondary-limit answers; client answers ${statuses}`,
    );
  }
  return lines.join('\n');
}
