/**
 * Measuring the cases. With --repeat N the cases run in N interleaved rounds (every case once
 * per round, servers kept up between rounds), so that a slow period of the machine hits every
 * case alike; each case reports its median run, and its ratio to the ceiling is the median of
 * the per-round ratios.
 */
import { requestHeaders, type BenchCase, type Workload } from './cases.js';
import { cpuSnapshot, stealShare } from './cpu.js';
import { runLoad, type LoadResult, type LoadTool } from './load.js';
import { LOAD_CPU } from './pin.js';
import { prefetchAll } from './prefetch.js';
import { treeCpuMicros } from './proc-cpu.js';
import { httpGet, httpPostJson } from './processes.js';
import type { CaseResult, UpstreamCounts } from './report.js';
import type { RunningServer } from './servers.js';
import { zipfPaths } from './zipf.js';

export type Started = { readonly ok: true; readonly server: RunningServer } | { readonly ok: false; readonly error: Error };

export interface MeasureContext {
  readonly tool: LoadTool;
  readonly fake: RunningServer;
  readonly tmpDir: string;
  readonly connections: number;
  readonly durationSec: number;
  readonly warmupSec: number;
  readonly repeat: number;
  /** --pin: wrk on LOAD_CPU (the servers were started pinned to SERVER_CPU). */
  readonly pin: boolean;
  /**
   * At most this many URLs in a full warm-up (workload warmAll), the most popular first; the smoke
   * run sets 1,000 so that it stays short (10,000 misses take several seconds on a small machine).
   */
  readonly warmAllLimit?: number;
  readonly log: (line: string) => void;
}

interface Run {
  readonly load: LoadResult;
  readonly upstream: UpstreamCounts | undefined;
  readonly steal: number | undefined;
  /** Server CPU µs per completed request over the measured window (undefined where /proc is missing). */
  readonly cpuPerRequest: number | undefined;
}

interface CaseState {
  readonly c: BenchCase;
  readonly paths: readonly string[];
  /** Every distinct URL of the working set, fetched once before the warm-up (workload warmAll), else empty. */
  readonly warmPaths: readonly string[];
  readonly headers: Readonly<Record<string, string>>;
  readonly server: RunningServer | undefined;
  error: string | undefined;
  readonly runs: Run[];
}

function pathsOf(workload: Workload): string[] {
  switch (workload.kind) {
    case 'single':
      return [workload.path];
    case 'zipf':
      return zipfPaths({
        prefix: workload.prefix,
        keys: workload.keys,
        exponent: workload.exponent,
        samples: workload.samples,
        seed: workload.seed,
      });
  }
}

function warmPathsOf(workload: Workload): string[] {
  if (workload.kind !== 'zipf' || workload.warmAll !== true) return [];
  return Array.from({ length: workload.keys }, (_, index) => `${workload.prefix}${index + 1}`);
}

async function resetFake(fake: RunningServer): Promise<void> {
  const status = await httpPostJson(`${fake.origin}/__fake/reset`, {});
  if (status !== 200) throw new Error(`POST /__fake/reset answered ${status}`);
}

async function fakeCounts(fake: RunningServer): Promise<UpstreamCounts | undefined> {
  try {
    const reply = await httpGet(`${fake.origin}/__fake/stats`);
    const stats = JSON.parse(reply.body.toString('utf8')) as { total?: unknown; notModified?: unknown };
    if (typeof stats.total !== 'number') return undefined;
    return { requests: stats.total, notModified: typeof stats.notModified === 'number' ? stats.notModified : 0 };
  } catch {
    return undefined;
  }
}

/** One request must answer 200, else the numbers would measure an error path. */
async function preflight(origin: string, path: string, headers: Readonly<Record<string, string>>): Promise<void> {
  const probe = await httpGet(`${origin}${path}`, 5_000, headers);
  if (probe.status !== 200) {
    throw new Error(`pre-flight GET ${path} answered ${probe.status}: ${probe.body.toString('utf8').slice(0, 200)}`);
  }
}

async function measureOnce(state: CaseState, server: RunningServer, first: boolean, ctx: MeasureContext): Promise<Run> {
  if (first) await preflight(server.origin, state.paths[0] ?? '/', state.headers);
  const spec = {
    origin: server.origin,
    paths: state.paths,
    connections: ctx.connections,
    tmpDir: ctx.tmpDir,
    headers: state.headers,
    ...(ctx.pin ? { cpu: LOAD_CPU } : {}),
  };
  if (state.warmPaths.length > 0) {
    const started = Date.now();
    const paths = state.warmPaths.slice(0, ctx.warmAllLimit ?? state.warmPaths.length);
    await prefetchAll({ origin: server.origin, paths, headers: state.headers, concurrency: 32, timeoutMs: 10_000 });
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    const partial =
      paths.length < state.warmPaths.length ? ` (the ${paths.length} most popular of ${state.warmPaths.length}: smoke run)` : '';
    ctx.log(`${state.c.name}: fetched ${paths.length} URLs once in ${seconds} s${partial}`);
  }
  if (ctx.warmupSec > 0) await runLoad(ctx.tool, { ...spec, durationSec: ctx.warmupSec });
  await resetFake(ctx.fake);
  const before = cpuSnapshot();
  const cpuBefore = treeCpuMicros(server.pids);
  const load = await runLoad(ctx.tool, { ...spec, durationSec: ctx.durationSec });
  const cpuAfter = treeCpuMicros(server.pids);
  const steal = stealShare(before, cpuSnapshot());
  const cpuPerRequest =
    cpuBefore === undefined || cpuAfter === undefined || load.requests === 0 ? undefined : (cpuAfter - cpuBefore) / load.requests;
  return { load, upstream: await fakeCounts(ctx.fake), steal, cpuPerRequest };
}

function median(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/** Median over rounds of metric(case run) / metric(other case's run in the same round); undefined when not comparable. */
function ratioTo(state: CaseState, other: CaseState | undefined, metric: (run: Run) => number | undefined): number | undefined {
  if (other === undefined || other.error !== undefined || other.runs.length !== state.runs.length) return undefined;
  const ratios = state.runs.map((run, index) => {
    const mine = metric(run);
    const theirs = other.runs[index] === undefined ? undefined : metric(other.runs[index]);
    return mine === undefined || theirs === undefined || theirs === 0 ? Number.NaN : mine / theirs;
  });
  return median(ratios.filter(Number.isFinite));
}

function summarize(state: CaseState, ceiling: CaseState | undefined, reference: CaseState | undefined): CaseResult {
  if (state.error !== undefined) return { id: state.c.id, name: state.c.name, ok: false, error: state.error };
  // The run shown is the one with the median req/s (the lower middle one for an even count).
  const byRps = [...state.runs].sort((a, b) => a.load.rps - b.load.rps);
  const shown = byRps[(byRps.length - 1) >> 1];
  if (shown === undefined) return { id: state.c.id, name: state.c.name, ok: false, error: 'no measured run' };
  const rps = (run: Run): number => run.load.rps;
  const cpu = (run: Run): number | undefined => run.cpuPerRequest;
  const cpuRuns = state.runs.map(cpu).filter((value): value is number => value !== undefined);
  const vsReference = ratioTo(state, reference, rps);
  return {
    id: state.c.id,
    name: state.c.name,
    ok: true,
    load: shown.load,
    // Errors of every run count, not only the shown one's.
    errors: state.runs.reduce((n, r) => n + r.load.non2xx + r.load.socketErrors, 0),
    upstream: shown.upstream,
    steal: shown.steal,
    runsRps: state.runs.map((r) => Math.round(r.load.rps)),
    vsCeiling: ratioTo(state, ceiling, rps),
    // CPU per request moves less than req/s: the median over the runs, not the shown run's.
    cpuPerRequest: median(cpuRuns),
    cpuVsCeiling: ratioTo(state, ceiling, cpu),
    vsReference: vsReference === undefined || reference === undefined ? undefined : { id: reference.c.id, ratio: vsReference },
  };
}

/** Measures every case (in rounds), stopping each server after its last run. */
export async function measureAll(cases: readonly BenchCase[], starts: readonly Started[], ctx: MeasureContext): Promise<CaseResult[]> {
  const states: CaseState[] = cases.map((benchCase, index) => {
    const st = starts[index];
    return {
      c: benchCase,
      paths: pathsOf(benchCase.workload),
      warmPaths: warmPathsOf(benchCase.workload),
      headers: requestHeaders(benchCase.server),
      server: st?.ok === true ? st.server : undefined,
      error: st === undefined ? 'not started' : st.ok ? undefined : st.error.message,
      runs: [],
    };
  });
  for (let round = 0; round < ctx.repeat; round++) {
    const last = round === ctx.repeat - 1;
    if (ctx.repeat > 1) ctx.log(`round ${round + 1}/${ctx.repeat}`);
    for (const state of states) {
      const server = state.server;
      if (server === undefined || state.error !== undefined) continue;
      try {
        const run = await measureOnce(state, server, round === 0, ctx);
        state.runs.push(run);
        const steal = run.steal === undefined ? '' : `, ${Math.round(run.steal * 100)}% CPU stolen`;
        ctx.log(`${state.c.name}: ${Math.round(run.load.rps)} req/s${steal}`);
      } catch (err) {
        state.error = (err as Error).message;
        ctx.log(`${state.c.name} FAILED: ${state.error}`);
      }
      if (last || state.error !== undefined) await server.process.stop();
    }
  }
  const ceiling = states.find((s) => s.c.id === 'ceiling');
  return states.map((state) =>
    summarize(
      state,
      ceiling,
      states.find((other) => other.c.id === state.c.compareTo),
    ),
  );
}
