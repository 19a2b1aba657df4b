/**
 * Refresh ahead on a hot set: N paths read R times a second each, with a short freshness lifetime,
 * with and without `cache.refresh_ahead`; the content of one path changes now and then. Reports the
 * share of reads answered as fresh hits (the others wait for the upstream: the slow tail), the
 * billable upstream requests (200s; a 304 to a token is free) against the content changes, and the
 * longest a changed path was still answered with its old content.
 *
 *   npm run bench:quota -- --hot-set [--seconds N] [--smoke] [--seed N] [--json FILE]
 *
 * Workload (deterministic from the seed): 10 repositories of the fake, cached with a 2 s lifetime
 * (`max_age_cap_seconds: 2`, standing in for GitHub's `max-age=60`), each read 10 times a second
 * through the proxy on a pool token, the reads of the paths interleaved; every 3 s one repository
 * (chosen by the seed) changes (`POST /__fake/mutate`). Each mode has its own fake and proxy; the
 * first read of each path (the cold fetch) is not counted.
 */
import { request } from 'undici';
import { startApp, type App } from '../src/main/app.js';
import { parseConfig, resolveSecrets } from '../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../fake-github/index.js';
import type { FakeStats } from '../fake-github/stats.js';
import { parseTokenSpec } from '../fake-github/tokens.js';
import { createLogger } from '../src/platform/log/logger.js';
import { mulberry32 } from './zipf.js';

export interface HotSetSettings {
  paths: number;
  /** Reads a second of each path. */
  rate: number;
  /** The entries' freshness lifetime (max_age_cap_seconds). */
  lifetimeSeconds: number;
  /** Measured seconds of each mode. */
  seconds: number;
  /** One repository changes every this many ms. */
  changeEveryMs: number;
  seed: number;
}

export const HOT_SET_DEFAULTS: HotSetSettings = {
  paths: 10,
  rate: 10,
  lifetimeSeconds: 2,
  seconds: 60,
  changeEveryMs: 3_000,
  seed: 20261127,
};

export interface HotSetResult {
  refreshAhead: boolean;
  reads: number;
  freshHits: number;
  errors: number;
  upstreamRequests: number;
  upstream304: number;
  /** The fake's quotaSpent delta: 200s (a 304 to a token is free). */
  billable: number;
  changes: number;
  /** The longest a read got a path's old content after its change was made, ms. */
  maxStaleMs: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Counts of etagere_refresh_ahead_total by result. */
  refreshes: Record<string, number>;
}

export interface HotSetResults {
  settings: HotSetSettings;
  results: HotSetResult[];
}

const TOKEN = 'hot_set_bench_token';
const repoPath = (index: number): string => `/repos/etagere-org/repo-${String(index + 1).padStart(3, '0')}`;
const STARS = '"stargazers_count":';

function starsOf(body: string): number {
  const index = body.indexOf(STARS);
  return index === -1 ? Number.NaN : Number.parseInt(body.slice(index + STARS.length, index + STARS.length + 12), 10);
}

async function startRig(settings: HotSetSettings, refreshAhead: boolean): Promise<{ fake: FakeUpstream; app: App }> {
  const fake = await startFakeUpstream({
    orgRepoCount: settings.paths,
    tokens: parseTokenSpec(`${TOKEN}@alice:public_repo`),
    tokenLimit: 1_000_000_000,
  });
  const cache = { max_age_cap_seconds: settings.lifetimeSeconds, refresh_ahead: refreshAhead };
  const raw = resolveSecrets(
    {
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      log: { level: 'silent' },
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache }],
      pool: { tokens: [{ name: 'bench', value: TOKEN }], probe_at_start: false },
    },
    {},
  );
  const app = await startApp(parseConfig(raw), { logger: createLogger({ level: 'silent' }), watchTokensFile: false });
  return { fake, app };
}

const sleepUntil = (at: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, at - performance.now())));

function percentile(sorted: readonly number[], rank: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((rank / 100) * sorted.length))]!;
}

async function refreshCounts(app: App): Promise<Record<string, number>> {
  const res = await request(`${app.adminUrl}/metrics`);
  const out: Record<string, number> = {};
  for (const line of (await res.body.text()).split('\n')) {
    const match = /^etagere_refresh_ahead_total\{result="([a-z_]+)"\} (\d+)/.exec(line);
    if (match !== null) out[match[1]!] = Number(match[2]);
  }
  return out;
}

/** What the fake saw and billed between two of its stats. */
function upstreamSince(before: FakeStats, after: FakeStats): Pick<HotSetResult, 'upstreamRequests' | 'upstream304' | 'billable'> {
  return {
    upstreamRequests: after.total - before.total,
    upstream304: after.notModified - before.notModified,
    billable: after.quotaSpent - before.quotaSpent,
  };
}

async function runMode(settings: HotSetSettings, refreshAhead: boolean): Promise<HotSetResult> {
  const { fake, app } = await startRig(settings, refreshAhead);
  try {
    const random = mulberry32(settings.seed);
    // Current content per path: its stars, and when the change that made it was done (ms, performance.now()).
    const stars = new Float64Array(settings.paths);
    const changedAt = new Float64Array(settings.paths).fill(Number.NEGATIVE_INFINITY);
    for (let index = 0; index < settings.paths; index++) {
      const res = await request(`${app.url}${repoPath(index)}`);
      stars[index] = starsOf(await res.body.text());
    }
    const before = fake.stats();
    const latencies: number[] = [];
    let reads = 0;
    let freshHits = 0;
    let errors = 0;
    let maxStaleMs = 0;
    let changes = 0;
    const read = async (index: number): Promise<void> => {
      const started = performance.now();
      const res = await request(`${app.url}${repoPath(index)}`);
      const body = await res.body.text();
      latencies.push(performance.now() - started);
      reads++;
      if (res.statusCode !== 200) {
        errors++;
        return;
      }
      if (String(res.headers['cache-status']).startsWith('etagere; hit')) freshHits++;
      // Old content read after the change was made: how long after.
      if (starsOf(body) !== stars[index] && started > changedAt[index]!) maxStaleMs = Math.max(maxStaleMs, started - changedAt[index]!);
    };
    const change = async (): Promise<void> => {
      const index = Math.floor(random() * settings.paths);
      const res = await request(`${fake.url}/__fake/mutate`, { method: 'POST', body: JSON.stringify({ path: repoPath(index) }) });
      const out = (await res.body.json()) as { changed?: { stargazers_count?: { to?: number } } };
      stars[index] = out.changed?.stargazers_count?.to ?? Number.NaN;
      changedAt[index] = performance.now();
      changes++;
    };
    const start = performance.now();
    const end = start + settings.seconds * 1000;
    const step = 1000 / (settings.rate * settings.paths);
    const pending: Array<Promise<void>> = [];
    let nextChange = start + settings.changeEveryMs;
    for (let tick = 0; ; tick++) {
      const at = start + tick * step;
      if (at >= end) break;
      await sleepUntil(at);
      if (performance.now() >= nextChange) {
        nextChange += settings.changeEveryMs;
        pending.push(change());
      }
      pending.push(read(tick % settings.paths));
      if (pending.length > 1_000) await Promise.all(pending.splice(0));
    }
    await Promise.all(pending);
    latencies.sort((a, b) => a - b);
    return {
      refreshAhead,
      reads,
      freshHits,
      errors,
      ...upstreamSince(before, fake.stats()),
      changes,
      maxStaleMs,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      maxMs: latencies.at(-1) ?? 0,
      refreshes: await refreshCounts(app),
    };
  } finally {
    await app.close();
    await fake.close();
  }
}

export async function runHotSetBench(opts: Partial<HotSetSettings> = {}): Promise<HotSetResults> {
  const settings: HotSetSettings = { ...HOT_SET_DEFAULTS, ...opts };
  if (!(settings.seconds > 0)) throw new RangeError(`seconds must be positive, got ${settings.seconds}`);
  const results: HotSetResult[] = [];
  // One mode at a time: the machine is shared.
  for (const refreshAhead of [false, true]) results.push(await runMode(settings, refreshAhead));
  return { settings, results };
}

const share = (part: number, whole: number): string => `${((100 * part) / Math.max(1, whole)).toFixed(2)} %`;

export function formatHotSet({ settings, results }: HotSetResults): string {
  const rows = [
    [
      'refresh_ahead',
      'reads',
      'fresh hits',
      'upstream (304)',
      'billable 200s',
      'changes',
      'max stale ms',
      'p50 / p99 / max ms',
      'refreshes',
    ],
    ...results.map((run) => [
      String(run.refreshAhead),
      String(run.reads),
      `${run.freshHits} (${share(run.freshHits, run.reads)})`,
      `${run.upstreamRequests} (${run.upstream304})`,
      String(run.billable),
      String(run.changes),
      run.maxStaleMs.toFixed(0),
      `${run.p50Ms.toFixed(1)} / ${run.p99Ms.toFixed(1)} / ${run.maxMs.toFixed(1)}`,
      Object.entries(run.refreshes)
        .map(([kind, count]) => `${kind} ${count}`)
        .join(', ') || '-',
    ]),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  const table = rows.map((row) => `| ${row.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')} |`).join('\n');
  return [
    `hot set: ${settings.paths} paths x ${settings.rate} reads/s for ${settings.seconds} s, lifetime ${settings.lifetimeSeconds} s, ` +
      `one change every ${settings.changeEveryMs} ms, seed ${settings.seed}`,
    '',
    table,
    '',
    "fresh hits = Cache-Status 'etagere; hit'; billable = the fake's quotaSpent delta; max stale = longest a read got a path's old content after its change.",
  ].join('\n');
}

/** Goals: with refresh ahead, >= 99.5 % fresh hits, billable 200s no more than the changes, changes seen within the lifetime; no errors. */
export function hotSetGoalFailures({ settings, results }: HotSetResults): string[] {
  const out: string[] = [];
  for (const run of results) {
    const name = `refresh_ahead ${run.refreshAhead}`;
    if (run.errors > 0) out.push(`${name}: ${run.errors} answers other than 200`);
    if (run.maxStaleMs > settings.lifetimeSeconds * 1000)
      out.push(`${name}: a change was seen ${run.maxStaleMs.toFixed(0)} ms late; goal <= the lifetime`);
    if (!run.refreshAhead) continue;
    if (run.freshHits < 0.995 * run.reads) out.push(`${name}: ${share(run.freshHits, run.reads)} fresh hits; goal >= 99.5 %`);
    if (run.billable > run.changes) out.push(`${name}: ${run.billable} billable 200s for ${run.changes} changes`);
  }
  return out;
}
