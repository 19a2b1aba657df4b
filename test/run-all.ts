/**
 * `npm test`: every step runs, whatever an earlier one gave, and the run fails if any step failed.
 * Type check, lint, build dist/ (the CLI the tests spawn), the suite, then the hardening suite one file
 * at a time (its latency goals must not depend on what else the cores are doing). The last line counts
 * the tests of both vitest runs.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_ENV, buildDist } from './helpers/build-dist.js';

interface Step {
  name: string;
  /** A command to spawn, or a step run in this process (its exit code). */
  command: string[] | (() => number);
  /** Where vitest writes its JSON report, for the closing count. */
  report?: string;
}

interface VitestReport {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
}

const reports = mkdtempSync(join(tmpdir(), 'etagere-test-'));
const extra = process.argv.slice(2);

function vitest(name: string, args: string[]): Step {
  const report = join(reports, `${name}.json`);
  const command = ['npx', 'vitest', 'run', ...args, '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...extra];
  return { name, command, report };
}

/** Builds dist/ once; the vitest runs after it skip their own build (test/helpers/build-dist.ts). */
function build(): number {
  try {
    const result = buildDist();
    process.env[BUILT_ENV] = '1';
    process.stdout.write(result.output);
    return result.status;
  } catch (error) {
    process.stdout.write(`${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

const steps: Step[] = [
  { name: 'typecheck', command: ['npm', 'run', '--silent', 'typecheck'] },
  { name: 'lint', command: ['npm', 'run', '--silent', 'lint'] },
  { name: 'build', command: build },
  vitest('suite', ['--exclude', 'test/hardening/**']),
  vitest('hardening', ['test/hardening', '--no-file-parallelism']),
];

function run(step: Step): Promise<number> {
  const { command } = step;
  if (typeof command === 'function') {
    process.stdout.write(`\n== ${step.name}\n`);
    return Promise.resolve(command());
  }
  process.stdout.write(`\n== ${step.name}: ${command.join(' ')}\n`);
  return new Promise((resolve) => {
    const child = spawn(command[0]!, command.slice(1), { stdio: 'inherit' });
    child.once('error', () => resolve(127));
    child.once('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 128)));
  });
}

function readReport(path: string): VitestReport | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as VitestReport;
  } catch {
    return undefined;
  }
}

const failedSteps: string[] = [];
let passed = 0;
let failed = 0;
let skipped = 0;
for (const step of steps) {
  const code = await run(step);
  if (code !== 0) failedSteps.push(`${step.name} (exit ${code})`);
  if (step.report === undefined) continue;
  const report = readReport(step.report);
  if (report === undefined) continue;
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  skipped += report.numPendingTests + report.numTodoTests;
}
rmSync(reports, { recursive: true, force: true });

process.stdout.write(`\n${failedSteps.length === 0 ? 'every step passed' : `failed: ${failedSteps.join(', ')}`}\n`);
process.stdout.write(`${passed} passed, ${failed} failed, ${skipped} skipped\n`);
process.exit(failedSteps.length === 0 ? 0 : 1);
