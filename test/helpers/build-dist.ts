/**
 * The tests spawn the built CLI (dist/src/main/cli.js), so dist/ must match src/. As a vitest globalSetup this
 * runs an incremental `tsc -p tsconfig.build.json` before any test file (and again before a watch-mode
 * rerun), only when a source is newer than the last build (scripts/build-if-stale.mjs: the check
 * `npm run prepare` makes too). The build info lives inside dist/, so deleting dist/ forces a full
 * build. `npm test` (test/run-all.ts) builds once beforehand and sets BUILT_ENV for the vitest runs
 * it starts, which then skip this step.
 */
import { spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { BUILD_ARGS, staleness, stamp } from '../../scripts/build-if-stale.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The entry point the tests spawn. */
export const DIST_CLI = join(ROOT, 'dist', 'src', 'main', 'cli.js');

/** Set by `npm test` once it has built dist/: the vitest runs it starts don't build again. */
export const BUILT_ENV = 'ETAGERE_TEST_DIST_BUILT';

const BUILD_INFO = join(ROOT, 'dist', '.tsbuildinfo');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** tsc's exit status when it reported errors but still wrote every output (noEmitOnError is off). */
const EMITTED_WITH_ERRORS = 2;

export interface BuildResult {
  /** tsc's exit status: 0, or EMITTED_WITH_ERRORS when the outputs are fresh but the sources have errors. */
  status: number;
  output: string;
}

/** Spawned, not run synchronously: `npm test` type-checks and lints while this builds. */
function compile(): Promise<BuildResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [TSC, ...BUILD_ARGS], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', (error) => resolve({ status: 1, output: `${output}${error.message}` }));
    child.once('close', (code) => resolve({ status: code ?? 1, output }));
  });
}

/**
 * Brings dist/ up to date with src/ (emit only, BUILD_ARGS). Throws when tsc wrote nothing usable;
 * errors with fresh outputs are returned (`npm run typecheck` is where they fail a run).
 */
export async function buildDist(): Promise<BuildResult> {
  const current = staleness(ROOT);
  if (!current.stale) return { status: 0, output: `${current.reason}: no build\n` };
  const started = Date.now();
  let result = await compile();
  if ((result.status === 0 || result.status === EMITTED_WITH_ERRORS) && !existsSync(DIST_CLI)) {
    // Build info that outlived its outputs (a file deleted by hand): start over from nothing.
    rmSync(BUILD_INFO, { force: true });
    result = await compile();
  }
  if ((result.status !== 0 && result.status !== EMITTED_WITH_ERRORS) || !existsSync(DIST_CLI)) {
    throw new Error(`building dist/ for the CLI tests failed (tsc exit ${result.status}):\n${result.output}`);
  }
  stamp(ROOT, started);
  return result;
}

async function buildForTests(): Promise<void> {
  if (process.env[BUILT_ENV] === '1') return;
  const result = await buildDist();
  if (result.status === EMITTED_WITH_ERRORS) {
    process.stderr.write(`dist/ is built from sources with errors (the CLI tests run them anyway):\n${result.output}\n`);
  }
}

export default async function setup(project: TestProject): Promise<void> {
  await buildForTests();
  // Watch mode: sources may have changed since the last run.
  project.onTestsRerun(async () => {
    delete process.env[BUILT_ENV];
    await buildForTests();
  });
}
