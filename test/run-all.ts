/**
 * `npm test`: every step runs, whatever an earlier one gave, and the run fails if any step failed.
 * The type check, ESLint, Prettier and the build of dist/ (the CLI the tests spawn) start at once;
 * the suite (vitest projects `integration` and `unit`) starts as soon as the build is done, beside
 * whatever is still checking. Once all of those have finished, the files that assert latencies run
 * alone, one at a time (project `timed`): what they measure must not depend on what else the cores
 * are doing. The last lines give each step's time and count the tests of both vitest runs.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_ENV, buildDist } from './helpers/build-dist.js';

interface Step {
  name: string;
  /** A command to spawn, or a step run in this process (its exit code). */
  command: string[] | (() => Promise<number>);
  /** Where vitest writes its JSON report, for the closing count. */
  report?: string;
  /** Output kept until the step ends, for a step that runs beside the suite (its lines stay together). */
  buffered?: boolean;
}

interface VitestReport {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
}

const reports = mkdtempSync(join(tmpdir(), 'etagere-test-'));
const extra = process.argv.slice(2);
const bin = (name: string): string => join('node_modules', '.bin', name);

/** `npm test -- <filters>`: a filter may match files of one vitest run only, and the other then has none. */
const filtered = extra.length > 0 ? ['--passWithNoTests'] : [];

function vitest(name: string, args: string[]): Step {
  const report = join(reports, `${name}.json`);
  const command = [
    'npx',
    'vitest',
    'run',
    ...args,
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${report}`,
    ...filtered,
    ...extra,
  ];
  return { name, command, report };
}

/** Builds dist/ once; the vitest runs after it skip their own build (test/helpers/build-dist.ts). */
async function build(): Promise<number> {
  try {
    const result = await buildDist();
    process.env[BUILT_ENV] = '1';
    process.stdout.write(`\n== build: done (tsc exit ${result.status})\n${result.output}`);
    return result.status;
  } catch (error) {
    process.stdout.write(`\n== build: failed\n${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

const started = performance.now();
const seconds = (from: number): string => `${((performance.now() - from) / 1000).toFixed(1)} s`;
const timings: string[] = [];
const failedSteps: string[] = [];
let passed = 0;
let failed = 0;
let skipped = 0;

function spawnStep(step: Step, command: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(command[0]!, command.slice(1), { stdio: step.buffered === true ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const done = (code: number): void => {
      if (step.buffered === true) process.stdout.write(`\n== ${step.name}: ${command.join(' ')} (exit ${code})\n${output}`);
      resolve(code);
    };
    child.once('error', () => done(127));
    child.once('close', (code, signal) => done(code ?? (signal === null ? 1 : 128)));
  });
}

async function run(step: Step): Promise<number> {
  const from = performance.now();
  const { command } = step;
  if (typeof command !== 'function' && step.buffered !== true) process.stdout.write(`\n== ${step.name}: ${command.join(' ')}\n`);
  const code = typeof command === 'function' ? await command() : await spawnStep(step, command);
  timings.push(`${step.name} ${seconds(from)} (from ${((from - started) / 1000).toFixed(1)} s)`);
  if (code !== 0) failedSteps.push(`${step.name} (exit ${code})`);
  const report = step.report === undefined ? undefined : readReport(step.report);
  if (report !== undefined) {
    passed += report.numPassedTests;
    failed += report.numFailedTests;
    skipped += report.numPendingTests + report.numTodoTests;
  }
  return code;
}

function readReport(path: string): VitestReport | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as VitestReport;
  } catch {
    return undefined;
  }
}

// Incremental like the build (its build info also lives in dist/): a full check when dist/ is gone.
const typecheck = [
  'node',
  bin('tsc'),
  '-p',
  'tsconfig.json',
  '--noEmit',
  '--incremental',
  '--tsBuildInfoFile',
  'dist/.typecheck.tsbuildinfo',
];
const checks = [
  run({ name: 'typecheck', command: typecheck, buffered: true }),
  run({ name: 'eslint', command: [bin('eslint'), '.'], buffered: true }),
  run({ name: 'prettier', command: [bin('prettier'), '--check', '--cache', '--cache-strategy', 'content', '.'], buffered: true }),
];
const suite = run({ name: 'build', command: build }).then(() => run(vitest('suite', ['--project', 'integration', '--project', 'unit'])));
await Promise.all([...checks, suite]);
await run(vitest('timed', ['--project', 'timed']));
rmSync(reports, { recursive: true, force: true });

process.stdout.write(`\n${timings.join('\n')}\ntotal ${seconds(started)}\n`);
process.stdout.write(`\n${failedSteps.length === 0 ? 'every step passed' : `failed: ${failedSteps.join(', ')}`}\n`);
process.stdout.write(`${passed} passed, ${failed} failed, ${skipped} skipped\n`);
process.exit(failedSteps.length === 0 ? 0 : 1);
