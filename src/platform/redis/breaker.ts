/**
 * A circuit breaker for Redis (pure: time is passed in). After `failures` failures in a row it
 * opens: callers skip Redis (a miss, a skipped write) instead of each waiting out the command
 * timeout. After `openMs` one trial call is let through (half-open); its success closes the
 * breaker, its failure opens it again.
 */
export type BreakerState = 'closed' | 'open' | 'half-open';

export interface Breaker {
  /** Whether a call may go to Redis now. In half-open state only one trial at a time. */
  allow(nowMs: number): boolean;
  success(): void;
  failure(nowMs: number): void;
  state(nowMs: number): BreakerState;
}

export function createBreaker(failures: number, openMs: number): Breaker {
  let failed = 0;
  let openedAt: number | undefined;
  let trial = false;
  const state = (now: number): BreakerState => {
    if (openedAt === undefined) return 'closed';
    return now - openedAt >= openMs ? 'half-open' : 'open';
  };
  return {
    state,
    allow(now) {
      const currentState = state(now);
      if (currentState === 'closed') return true;
      if (currentState === 'open' || trial) return false;
      trial = true;
      return true;
    },
    success() {
      failed = 0;
      openedAt = undefined;
      trial = false;
    },
    failure(now) {
      trial = false;
      failed++;
      if (openedAt !== undefined || failed >= failures) openedAt = now;
    },
  };
}
