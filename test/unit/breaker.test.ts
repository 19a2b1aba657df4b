import { describe, expect, it } from 'vitest';
import { createBreaker } from '../../src/platform/redis/breaker.js';
import { reconnectDelay } from '../../src/platform/redis/connection.js';

describe('Redis circuit breaker', () => {
  it('opens after N failures in a row, lets one trial through after the open time, closes on success', () => {
    const breaker = createBreaker(3, 1000);
    expect(breaker.allow(0)).toBe(true);
    breaker.failure(0);
    breaker.failure(1);
    expect(breaker.state(2)).toBe('closed');
    breaker.failure(2);
    expect(breaker.state(3)).toBe('open');
    expect(breaker.allow(500)).toBe(false);
    expect(breaker.allow(1002)).toBe(true); // the trial
    expect(breaker.allow(1003)).toBe(false); // only one at a time
    breaker.success();
    expect(breaker.state(1004)).toBe('closed');
    expect(breaker.allow(1004)).toBe(true);
  });
  it('a failed trial opens it again for the full time', () => {
    const breaker = createBreaker(1, 1000);
    breaker.failure(0);
    expect(breaker.allow(1000)).toBe(true);
    breaker.failure(1000);
    expect(breaker.allow(1500)).toBe(false);
    expect(breaker.allow(2000)).toBe(true);
  });
  it('a success resets the failure count', () => {
    const breaker = createBreaker(2, 1000);
    breaker.failure(0);
    breaker.success();
    breaker.failure(1);
    expect(breaker.state(2)).toBe('closed');
  });
  it('reconnects with a bounded backoff', () => {
    expect([0, 1, 2, 3, 4, 20].map(reconnectDelay)).toEqual([50, 100, 200, 400, 500, 500]);
  });
});
