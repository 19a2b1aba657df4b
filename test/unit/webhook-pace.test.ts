/**
 * The pace a webhook delivery's body must keep: whole within webhooks.read_timeout_ms, and after a
 * first second at least the floor rate on average, so a trickling sender loses its read slot.
 */
import { describe, expect, it } from 'vitest';
import { GRACE_MS, MIN_BYTES_PER_SECOND, paceOf } from '../../src/paths/webhooks/pace.js';

const rules = { deadlineMs: 10_000, minBytesPerSecond: MIN_BYTES_PER_SECOND, graceMs: GRACE_MS };

describe('the pace of a delivery being read', () => {
  it('leaves the first second alone', () => {
    expect(paceOf(0, 0, rules)).toBe('on-pace');
    expect(paceOf(GRACE_MS, 0, rules)).toBe('on-pace');
  });

  it('cuts a sender below the floor after the first second: one byte a second, or one that stopped mid-body', () => {
    expect(paceOf(1_100, 1, rules)).toBe('too-slow'); // one byte a second
    expect(paceOf(1_500, 4_000, rules)).toBe('too-slow'); // 4 KB, then nothing
    expect(paceOf(1_500, 8_192, rules)).toBe('on-pace'); // exactly the floor
    expect(paceOf(3_000, 40_000, rules)).toBe('on-pace');
  });

  it('cuts at the deadline whatever the rate', () => {
    expect(paceOf(9_999, 10_000_000, rules)).toBe('on-pace');
    expect(paceOf(10_000, 10_000_000, rules)).toBe('past-deadline');
  });
});
