/** `npm test` runs the hardening tests small and `npm run soak` full size; a test's own variable beats both. */
import { afterEach, describe, expect, it } from 'vitest';
import { SOAK_ENV, soakSize } from '../helpers/soak.js';

const VARIABLE = 'ETAGERE_TEST_SOAK_SIZE';
const SIZES = { soak: 10_000, quick: 1_000 };

afterEach(() => {
  delete process.env[VARIABLE];
  delete process.env[SOAK_ENV];
});

describe('soakSize', () => {
  it('npm test: the quick size', () => {
    expect(soakSize(VARIABLE, SIZES)).toBe(1_000);
  });

  it('npm run soak: the full size', () => {
    process.env[SOAK_ENV] = '1';
    expect(soakSize(VARIABLE, SIZES)).toBe(10_000);
  });

  it("the test's own variable beats both", () => {
    process.env[SOAK_ENV] = '1';
    process.env[VARIABLE] = '25';
    expect(soakSize(VARIABLE, SIZES)).toBe(25);
  });

  it('hostile: a size that is not a positive integer is refused by name, not run as NaN or 0 cases', () => {
    for (const bad of ['lots', '0', '-5', '1.5', '1e400']) {
      process.env[VARIABLE] = bad;
      expect(() => soakSize(VARIABLE, SIZES), bad).toThrow(`${VARIABLE} must be a positive integer, got "${bad}"`);
    }
  });
});
