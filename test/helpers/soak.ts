/**
 * The full-size runs of the hardening tests (10,000 sequences, cases or faulted requests) take minutes:
 * `npm run soak` (test/run-soak.ts) runs them with SOAK_ENV=1, and `npm test` runs the same files and
 * assertions at a smaller size. A test's own variable (ISOLATION_SEQUENCES, FUZZ_CASES ...) beats both.
 */
export const SOAK_ENV = 'ETAGERE_SOAK';

/** The size a test runs at: its variable when set (a positive integer), else the soak or the quick size. */
export function soakSize(variable: string, sizes: { soak: number; quick: number }): number {
  const given = process.env[variable];
  if (given !== undefined && given !== '') {
    const value = Number(given);
    if (!Number.isSafeInteger(value) || value < 1) throw new Error(`${variable} must be a positive integer, got "${given}"`);
    return value;
  }
  return process.env[SOAK_ENV] === '1' ? sizes.soak : sizes.quick;
}
