#!/usr/bin/env node
/**
 * Builds dist/ (tsc -p tsconfig.build.json) only when it is older than the sources: `npm run prepare`
 * runs it, and the tests' global setup (test/helpers/build-dist.ts) uses the same check. A build
 * leaves dist/.stamp, dated when the build started; dist/ is stale when the stamp is missing or a
 * file or folder under src/ or fake-github/, a tsconfig*.json or package.json is newer than it (a
 * folder's date moves when a file in it is added, renamed or deleted). Plain node, no dependencies.
 *
 *   node scripts/build-if-stale.mjs           # build if stale, else say why not
 *   node scripts/build-if-stale.mjs --check   # exit 1 when stale, 0 when current; builds nothing
 */
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, rmSync, statSync, utimesSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Folders and files dist/ is built from, relative to the repository root. */
export const SOURCES = ['src', 'fake-github', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];

/** Relative to the repository root: the date of the last build's start. */
export const STAMP = join('dist', '.stamp');

/**
 * tsc's arguments for dist/: incremental, its build info inside dist/ (deleting dist/ means a full
 * build), and emit only (--noCheck: half the time; `npm test` and `npm run typecheck` check the types,
 * `npm run build` builds with the check).
 */
export const BUILD_ARGS = ['-p', 'tsconfig.build.json', '--noCheck', '--incremental', '--tsBuildInfoFile', join('dist', '.tsbuildinfo')];

/** The newest modification time (ms) of `path` and, for a folder, of everything below it; 0 when missing. */
function newest(path) {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return 0;
  }
  let latest = stat.mtimeMs;
  if (stat.isDirectory()) {
    for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  }
  return latest;
}

/** Whether dist/ under `root` must be built, and why (for the log line). */
export function staleness(root) {
  const stamp = join(root, STAMP);
  let built;
  try {
    built = statSync(stamp).mtimeMs;
  } catch {
    return { stale: true, reason: `${STAMP} is missing` };
  }
  if (!existsSync(join(root, 'dist', 'src', 'main', 'cli.js'))) return { stale: true, reason: 'dist/src/main/cli.js is missing' };
  for (const source of SOURCES) {
    if (newest(join(root, source)) > built) return { stale: true, reason: `${source} changed since the last build` };
  }
  return { stale: false, reason: 'dist/ is newer than every source' };
}

/** Records a build that started at `startedMs` (a source saved during the build stays newer than it). */
export function stamp(root, startedMs) {
  mkdirSync(join(root, 'dist'), { recursive: true });
  const path = join(root, STAMP);
  closeSync(openSync(path, 'w'));
  const at = new Date(startedMs);
  utimesSync(path, at, at);
}

function main() {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const { stale, reason } = staleness(root);
  if (process.argv.includes('--check')) {
    console.log(`dist/: ${stale ? 'stale' : 'current'} (${reason})`);
    return stale ? 1 : 0;
  }
  if (!stale) {
    console.log(`dist/ is current, no build (${reason})`);
    return 0;
  }
  console.log(`building dist/ (${reason})`);
  const started = Date.now();
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  // Build info that outlived its outputs would make tsc skip them.
  if (!existsSync(join(root, 'dist', 'src', 'main', 'cli.js'))) rmSync(join(root, 'dist', '.tsbuildinfo'), { force: true });
  const result = spawnSync(process.execPath, [tsc, ...BUILD_ARGS], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) return result.status ?? 1;
  stamp(root, started);
  return 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === resolve(process.argv[1])) process.exitCode = main();
