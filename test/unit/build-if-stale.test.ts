/**
 * `npm run prepare` and the tests' global setup build dist/ only when it is older than the sources
 * (scripts/build-if-stale.mjs): a checkout already built starts at once, and an edit is never missed.
 */
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SOURCES, STAMP, staleness, stamp } from '../../scripts/build-if-stale.mjs';

const BUILT_AT = Date.UTC(2026, 0, 1);
const at = (ms: number): Date => new Date(ms);

let root: string;

/** A checkout whose every source is dated an hour before the build, built at BUILT_AT. */
function builtCheckout(): void {
  const files = ['src/main/cli.ts', 'src/cache/store.ts', 'fake-github/server.ts', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];
  for (const file of files) {
    mkdirSync(join(root, file, '..'), { recursive: true });
    writeFileSync(join(root, file), '{}\n');
  }
  mkdirSync(join(root, 'dist', 'src', 'main'), { recursive: true });
  writeFileSync(join(root, 'dist', 'src', 'main', 'cli.js'), '\n');
  for (const dir of ['src', 'src/main', 'src/cache', 'fake-github'])
    utimesSync(join(root, dir), at(BUILT_AT - 3_600_000), at(BUILT_AT - 3_600_000));
  for (const file of files) utimesSync(join(root, file), at(BUILT_AT - 3_600_000), at(BUILT_AT - 3_600_000));
  stamp(root, BUILT_AT);
}

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'etagere-stale-'));
  builtCheckout();
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

describe('dist/ staleness', () => {
  it('a checkout built after its last edit is current: nothing to build', () => {
    expect(staleness(root)).toEqual({ stale: false, reason: 'dist/ is newer than every source' });
  });

  it('a source edited after the build makes dist/ stale, however deep it is', () => {
    utimesSync(join(root, 'src/cache/store.ts'), at(BUILT_AT + 1_000), at(BUILT_AT + 1_000));
    expect(staleness(root)).toEqual({ stale: true, reason: 'src changed since the last build' });
  });

  it('a file of the fake, a tsconfig or package.json edited after the build makes dist/ stale', () => {
    for (const file of ['fake-github/server.ts', 'tsconfig.build.json', 'package.json']) {
      builtCheckout();
      utimesSync(join(root, file), at(BUILT_AT + 1), at(BUILT_AT + 1));
      expect(staleness(root).stale, file).toBe(true);
    }
    expect(SOURCES).toEqual(expect.arrayContaining(['src', 'fake-github', 'tsconfig.json', 'tsconfig.build.json', 'package.json']));
  });

  it('a source deleted after the build makes dist/ stale (its folder is newer)', () => {
    unlinkSync(join(root, 'src/cache/store.ts'));
    expect(staleness(root).stale).toBe(true);
  });

  it('a source saved during the build stays newer than the stamp, dated when the build started', () => {
    utimesSync(join(root, 'src/main/cli.ts'), at(BUILT_AT + 500), at(BUILT_AT + 500));
    stamp(root, BUILT_AT); // the build that started before the save ends after it
    expect(staleness(root).stale).toBe(true);
  });

  it('hostile: no stamp (a dist/ from elsewhere, or a build that failed) is stale', () => {
    unlinkSync(join(root, STAMP));
    expect(staleness(root)).toEqual({ stale: true, reason: `${STAMP} is missing` });
  });

  it('hostile: no dist/ at all is stale', () => {
    rmSync(join(root, 'dist'), { recursive: true });
    expect(staleness(root).stale).toBe(true);
  });

  it('hostile: a stamp whose CLI output was deleted is stale', () => {
    unlinkSync(join(root, 'dist', 'src', 'main', 'cli.js'));
    expect(staleness(root)).toEqual({ stale: true, reason: 'dist/src/main/cli.js is missing' });
  });
});
