import { describe, expect, it } from 'vitest';
import { createBreaker } from '../../src/redis/breaker.js';
import { reconnectDelay } from '../../src/redis/connection.js';

describe('Redis circuit breaker', () => {
  it('opens after N failures in a row, lets one trial through after the open time, closes on success', () => {
    const b = createBreaker(3, 1000);
    expect(b.allow(0)).toBe(true);
    b.failure(0);
    b.failure(1);
    expect(b.state(2)).toBe('closed');
    b.failure(2);
    expect(b.state(3)).toBe('open');
    expect(b.allow(500)).toBe(false);
    expect(b.allow(1002)).toBe(true); // the trial
    expect(b.allow(1003)).toBe(false); // only one at a time
    b.success();
    expect(b.state(1004)).toBe('closed');
    expect(b.allow(1004)).toBe(true);
  });
  it('a failed trial opens it again for the full time', () => {
    const b = createBreaker(1, 1000);
    b.failure(0);
    expect(b.allow(1000)).toBe(true);
    b.failure(1000);
    expect(b.allow(1500)).toBe(false);
    expect(b.allow(2000)).toBe(true);
  });
  it('a success resets the failure count', () => {
    const b = createBreaker(2, 1000);
    b.failure(0);
    b.success();
    b.failure(1);
    expect(b.state(2)).toBe('closed');
  });
  it('reconnects with a bounded backoff', () => {
    expect([0, 1, 2, 3, 4, 20].map(reconnectDelay)).toEqual([50, 100, 200, 400, 500, 500]);
  });
});
