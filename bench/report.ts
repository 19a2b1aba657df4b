/** Machine facts and the results table. */
import { spawnSync } from 'node:child_process';
import { cpus, release, type } from 'node:os';
import { busyOver } from './cpu.js';
import type { LoadResult, LoadTool } from './load.js';

export interface MachineFacts {
  readonly cpu: string;
  readonly cores: number;
  readonly os: string;
  readonly node: string;
  readonly loadTool: string;
  readonly date: string;
  /** Short commit of the work tree, "+dirty" when it has uncommitted changes. */
  readonly commit: string;
  /** Share of CPU time busy (all cores) over a short sample before the run (well above 0 skews the numbers). */
  readonly busyAtStart: number;
}

function gitCommit(root: string): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' });
  if (head.status !== 0) return 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root, encoding: 'utf8' });
  return `${head.stdout.trim()}${dirty.stdout.trim() !== '' ? '+dirty' : ''}`;
}

export async function machineFacts(tool: LoadTool, root: string): Promise<MachineFacts> {
  const busy = await busyOver(500);
  return {
    cpu: cpus()[0]?.model.trim() ?? 'unknown',
    // The machine's cores, not this process's affinity (--pin narrows that to one CPU).
    cores: cpus().length,
    os: `${type()} ${release()}`,
    node: process.version,
    loadTool: tool.version,
    date: new Date().toISOString(),
    commit: gitCommit(root),
    busyAtStart: Math.round(busy * 100) / 100,
  };
}

export interface RunSettings {
  readonly durationSec: number;
  readonly warmupSec: number;
  readonly connections: number;
  readonly repeat: number;
  readonly logLevel: string;
  readonly source: 'src (tsx)' | 'dist';
  /** --pin: servers on CPU 0, load generator, fake upstream and harness on CPU 1. */
  readonly pin: boolean;
}

export function header(machine: MachineFacts, settings: RunSettings): string {
  return [
    'etagere benchmark',
    `  cpu         ${machine.cpu} x ${machine.cores} cores`,
    `  os          ${machine.os}`,
    `  node        ${machine.node}`,
    `  load tool   ${machine.loadTool}`,
    `  date        ${machine.date}`,
    `  commit      ${machine.commit}`,
    `  cpu busy    ${Math.round(machine.busyAtStart * 100)}% before the run` +
      (machine.busyAtStart >= 0.15 ? '  WARNING: something else is using the CPU; numbers will be low and noisy' : ''),
    `  settings    ${settings.repeat > 1 ? `median of ${settings.repeat} runs of ` : ''}${settings.durationSec} s per case after ${settings.warmupSec} s warm-up, ${settings.connections} connections, ` +
      `etagere log level ${settings.logLevel}, run from ${settings.source}`,
    `  pinning     ${settings.pin ? 'servers on CPU 0; wrk, the fake upstream and the harness on CPU 1 (taskset)' : 'none (every process on every core)'}`,
  ].join('\n');
}

export interface UpstreamCounts {
  /** API requests the fake answered. */
  readonly requests: number;
  /** Of which 304 Not Modified (revalidations that matched). */
  readonly notModified: number;
}

export type CaseResult =
  | {
      readonly id: string;
      readonly name: string;
      readonly ok: true;
      readonly load: LoadResult;
      /** non-2xx responses plus socket errors, over every measured run. */
      readonly errors: number;
      /** req/s of each measured run (--repeat), in run order. */
      readonly runsRps: readonly number[];
      /** What the fake upstream saw during the measured phase (undefined when unknown). */
      readonly upstream: UpstreamCounts | undefined;
      /** Share of CPU time stolen by the hypervisor during the shown run (undefined where unknown). */
      readonly steal: number | undefined;
      /** req/s relative to the ceiling case: median of the per-round ratios (undefined without a ceiling). */
      readonly vsCeiling: number | undefined;
      /** Server CPU µs per request (user + system of the server's processes over the measured window), median over runs. */
      readonly cpuPerRequest: number | undefined;
      /** CPU µs per request relative to the ceiling's: median of the per-round ratios. */
      readonly cpuVsCeiling: number | undefined;
      /** req/s relative to the case's reference (BenchCase.compareTo) in the same round: median of the per-round ratios. */
      readonly vsReference: { readonly id: string; readonly ratio: number } | undefined;
    }
  | { readonly id: string; readonly name: string; readonly ok: false; readonly error: string };

/** The results as a Markdown table. */
export function table(results: readonly CaseResult[]): string {
  const repeated = results.some((r) => r.ok && r.runsRps.length > 1);
  const head = [
    'case',
    'req/s',
    ...(repeated ? ['runs min-max'] : []),
    'p50 ms',
    'p99 ms',
    'errors',
    'upstream req (304)',
    'steal',
    '× ceiling',
    'CPU µs/req',
    'CPU × ceiling',
    'vs ref',
  ];
  const rows = results.map((result) =>
    result.ok
      ? [
          result.name,
          Math.round(result.load.rps).toString(),
          ...(repeated ? [`${Math.min(...result.runsRps)}-${Math.max(...result.runsRps)}`] : []),
          result.load.p50Ms.toFixed(2),
          result.load.p99Ms.toFixed(2),
          result.errors.toString(),
          result.upstream === undefined ? 'n/a' : `${result.upstream.requests} (${result.upstream.notModified})`,
          result.steal === undefined ? 'n/a' : `${Math.round(result.steal * 100)}%`,
          result.vsCeiling === undefined ? 'n/a' : result.vsCeiling.toFixed(2),
          result.cpuPerRequest === undefined ? 'n/a' : result.cpuPerRequest.toFixed(1),
          result.cpuVsCeiling === undefined ? 'n/a' : result.cpuVsCeiling.toFixed(2),
          result.vsReference === undefined ? '' : `${result.vsReference.ratio.toFixed(2)} ${result.vsReference.id}`,
        ]
      : [result.name, 'FAILED', ...head.slice(2).map(() => '-')],
  );
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const numeric = (i: number): boolean => i > 0 && head[i] !== 'vs ref';
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((c, i) => (numeric(i) ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (numeric(i) ? `${'-'.repeat(w + 1)}:` : `:${'-'.repeat(w + 1)}`)).join('|')}|`;
  return [line(head), rule, ...rows.map(line)].join('\n');
}
