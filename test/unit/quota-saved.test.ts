import { describe, expect, it } from 'vitest';
import { savedQuota } from '../../src/platform/metrics/quota-windows.js';

describe('quota saved: a request answered without spending upstream quota', () => {
  const table: Array<[string | undefined, boolean, boolean]> = [
    // outcome, authorised exchange, saved
    ['hit', false, true],
    ['hit', true, true],
    ['stale', false, true],
    ['coalesced', false, true],
    ['coalesced', true, true],
    ['revalidated', true, true], // an authorised 304 is free on GitHub
    ['revalidated', false, false], // an anonymous 304 still counts against the IP's limit
    ['miss', true, false],
    ['miss', false, false],
    ['bypass', true, false],
    ['error', false, false],
    [undefined, true, false],
    [undefined, false, false],
  ];
  it.each(table)('%s (authorised: %s) -> %s', (outcome, authorized, saved) => {
    expect(savedQuota(outcome, authorized)).toBe(saved);
  });
});
