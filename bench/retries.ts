/**
 * Retries in transit under connection resets: how many client GETs succeed when the upstream
 * resets a share of its connections and nothing is stored to fall back on.
 *
 *   npm run bench:quota -- --retries [--smoke] [--seed N] [--json FILE]
 *
 * Workload: the fake resets the connection of each request, before any byte, with probability
 * 5 % (fault `reset`, seeded dice: docs/fake-upstream.md). The proxy gets distinct GETs only (a
 * query no two requests share, so each is a miss with no stored entry), spread over three ways
 * through it: the cache's exchange without a credential, the cache's exchange on a pool token, and
 * the streamed forward (policy none). The same run is made with `upstreams[].retries` 0, 1 (the
 * default) and 2, each on its own fake and proxy. Goal: >= 99.9 % of client GETs answered 200 at
 * the default.
 *
 * With independent resets of probability p, a request fails only if all its 1 + retries attempts
 * are reset: the expected success is 1 - p^(1 + retries) (95 %, 99.75 %, 99.9875 % at p = 5 %),
 * as long as the retry budget (10 % of first attempts) covers the p share that needs a retry.
 */
import { writeFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { startApp } from '../src/main/app.js';
import { parseConfig } from '../src/platform/config/load.js';
import { createLogger } from '../src/platform/log/logger.js';
import { startFakeUpstream } from '../fake-github/index.js';
import { UNPACED } from './pacing.js';

export interface RetriesSettings {
  /** Client GETs per run. Default 20,000 (smoke: 3,000). */
  requests: number;
  /** Share of requests whose upstream connection is reset. Default 0.05. */
  resetRatio: number;
  /** Client requests in flight at once. Default 32. */
  concurrency: number;
  /** Seed of the fake's fault dice. Default 42. */
  seed: number;
  /** The `upstreams[].retries` values compared. Default 0, 1, 2. */
  retries: readonly number[];
}

export const RETRIES_DEFAULTS: RetriesSettings = { requests: 20_000, resetRatio: 0.05, concurrency: 32, seed: 42, retries: [0, 1, 2] };

/** The default of `upstreams[].retries`, whose run the goal is about. */
const DEFAULT_RETRIES = 1;
export const RETRIES_GOAL = 0.999;

export interface RetriesResult {
  retries: number;
  requests: number;
  succeeded: number;
  /** Failed answers by status (502, 504, ...), and transport errors as "error". */
  failed: Record<string, number>;
  /** Connections the fake reset. */
  resets: number;
  /** Retries the proxy sent, and failures it did not retry for lack of budget. */
  retried: number;
  budgetExhausted: number;
  seconds: number;
}

export interface RetriesResults {
  settings: RetriesSettings;
  runs: RetriesResult[];
}

const WAYS = ['/cached', '/pooled', '/forward'] as const;

async function runOne(retries: number, settings: RetriesSettings): Promise<RetriesResult> {
  const fake = await startFakeUpstream({ anonymousLimit: 1e9, tokenLimit: 1e9 });
  const upstream = { url: fake.url, strip_prefix: true, retries };
  const config = parseConfig({
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: 'silent' },
    upstreams: [
      { name: 'cached', prefix: '/cached', ...upstream },
      { name: 'pooled', prefix: '/pooled', token_pool: true, ...upstream },
      { name: 'forward', prefix: '/forward', cache: { policy: 'none' }, ...upstream },
    ],
    pool: { tokens: [{ name: 'bench', value: 'demo_token_bob_public' }], points_per_minute: UNPACED },
  });
  const app = await startApp(config, { logger: createLogger({ level: 'silent' }) });
  const client = new Agent({ connections: settings.concurrency, keepAliveTimeout: 10_000 });
  try {
    const faults = { faults: [{ kind: 'reset', rate: settings.resetRatio }], seed: settings.seed };
    const set = await fetch(`${fake.url}/__fake/faults`, { method: 'POST', body: JSON.stringify(faults) });
    if (set.status !== 200) throw new Error(`POST /__fake/faults: ${set.status} ${await set.text()}`);
    const failed: Record<string, number> = {};
    let succeeded = 0;
    let next = 0;
    const started = performance.now();
    const worker = async (): Promise<void> => {
      for (let i = next++; i < settings.requests; i = next++) {
        const path = `${WAYS[i % WAYS.length]}/repos/etagere-org/repo-${String(1 + (i % 75)).padStart(3, '0')}?bench=${i}`;
        try {
          const res = await request(`${app.url}${path}`, { dispatcher: client });
          await res.body.dump();
          if (res.statusCode === 200) succeeded++;
          else failed[res.statusCode] = (failed[res.statusCode] ?? 0) + 1;
        } catch {
          failed.error = (failed.error ?? 0) + 1;
        }
      }
    };
    await Promise.all(Array.from({ length: settings.concurrency }, worker));
    const seconds = (performance.now() - started) / 1000;
    const rules = (await (await fetch(`${fake.url}/__fake/faults`)).json()) as { faults: Array<{ injected: number }> };
    const metrics = await (await fetch(`${app.adminUrl}/metrics`)).text();
    return {
      retries,
      requests: settings.requests,
      succeeded,
      failed,
      resets: rules.faults[0]?.injected ?? 0,
      retried: counted(metrics, 'retried'),
      budgetExhausted: counted(metrics, 'budget_exhausted'),
      seconds,
    };
  } finally {
    await client.close();
    await app.close();
    await fake.close();
  }
}

/** The sum of etagere_upstream_retries_total samples with this outcome. */
function counted(metrics: string, outcome: string): number {
  let sum = 0;
  for (const match of metrics.matchAll(/^etagere_upstream_retries_total\{(.*)\} (\S+)$/gm)) {
    if (match[1]!.includes(`outcome="${outcome}"`)) sum += Number(match[2]);
  }
  return sum;
}

export async function runRetriesBench(opts: Partial<RetriesSettings> = {}): Promise<RetriesResults> {
  const settings = { ...RETRIES_DEFAULTS, ...opts };
  const runs: RetriesResult[] = [];
  for (const retries of settings.retries) runs.push(await runOne(retries, settings));
  return { settings, runs };
}

const pct = (part: number, whole: number): string => `${((100 * part) / Math.max(1, whole)).toFixed(3)} %`;

export function formatRetries(results: RetriesResults): string {
  const { settings } = results;
  const lines = [
    `retries in transit: ${settings.requests} distinct GETs (no stored entry), ${pct(settings.resetRatio, 1)} of upstream connections reset, concurrency ${settings.concurrency}, seed ${settings.seed}`,
    'retries  succeeded            expected    failed                 resets  retried  budget-skipped  seconds',
  ];
  for (const run of results.runs) {
    const expected = 1 - settings.resetRatio ** (1 + run.retries);
    const failed = Object.entries(run.failed)
      .map(([status, n]) => `${status}:${n}`)
      .join(' ');
    lines.push(
      `${String(run.retries).padEnd(8)} ${`${run.succeeded} (${pct(run.succeeded, run.requests)})`.padEnd(20)} ${pct(expected, 1).padEnd(11)} ${(failed || '-').padEnd(22)} ${String(run.resets).padEnd(7)} ${String(run.retried).padEnd(8)} ${String(run.budgetExhausted).padEnd(15)} ${run.seconds.toFixed(1)}`,
    );
  }
  return lines.join('\n');
}

/** The goal: >= 99.9 % of GETs succeed at the default `retries`. */
export function retriesGoalFailures(results: RetriesResults): string[] {
  const run = results.runs.find((r) => r.retries === DEFAULT_RETRIES);
  if (run === undefined || run.succeeded >= RETRIES_GOAL * run.requests) return [];
  return [`retries ${run.retries}: ${pct(run.succeeded, run.requests)} of GETs succeeded; goal >= ${pct(RETRIES_GOAL, 1)}`];
}

type Flags = Readonly<Record<string, string | boolean | undefined>>;

/** `npm run bench:quota -- --retries`: runs, prints, and exits (1 on a missed goal under --smoke). */
export function runRetriesCli(values: Flags): void {
  const opts: Partial<RetriesSettings> = {};
  if (values.smoke === true) opts.requests = 3_000;
  if (typeof values.seed === 'string') opts.seed = Number(values.seed);
  runRetriesBench(opts).then(
    (results) => {
      if (typeof values.json === 'string') writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
      const failures = retriesGoalFailures(results);
      const verdict = failures.length > 0 ? `retries: goals not met:\n  ${failures.join('\n  ')}\n` : 'retries: goals met\n';
      process.stdout.write(`${formatRetries(results)}\n${verdict}`, () =>
        process.exit(values.smoke === true && failures.length > 0 ? 1 : 0),
      );
    },
    (err: unknown) => {
      process.stderr.write(`retries: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
