/**
 * `npm run soak`: the hardening tests at full size (test/helpers/soak.ts), one file at a time like the
 * rest of the `timed` project. CI runs it after `npm test`. Extra arguments go to vitest.
 */
import { spawnSync } from 'node:child_process';
import { SOAK_ENV } from './helpers/soak.js';

/** The files whose size SOAK_ENV raises. */
export const SOAK_FILES = [
  'test/hardening/isolation-scale.test.ts',
  'test/hardening/fuzz.test.ts',
  'test/hardening/upstream-faults.test.ts',
];

const result = spawnSync('npx', ['vitest', 'run', '--project', 'timed', ...SOAK_FILES, ...process.argv.slice(2)], {
  stdio: 'inherit',
  env: { ...process.env, [SOAK_ENV]: '1' },
});
process.exit(result.status ?? 1);
