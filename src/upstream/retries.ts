/**
 * The retry state of one upstream client: its budget (retry-rules.ts) over the requests it sent,
 * and the decision after each attempt. One instance per upstream client, no shared state: each
 * replica (and each cluster worker) budgets its own traffic.
 */
import {
  backoffMs,
  budgetAllows,
  countRequest,
  countRetry,
  emptyBudget,
  idempotent,
  rolled,
  type BudgetState,
  type TransitReason,
} from './retry-rules.js';

/** What became of a transit failure: sent again, or not for lack of budget (counted by the caller's observer). */
export type RetryOutcome = 'retried' | 'budget_exhausted';
export type RetryObserver = (reason: TransitReason, outcome: RetryOutcome) => void;

export type RetryDecision = { readonly kind: 'retry'; readonly delayMs: number } | { readonly kind: 'stop' };

const STOP: RetryDecision = { kind: 'stop' };

export class Retries {
  private state: BudgetState;

  /**
   * `max`: retries per request (`upstreams[].retries`, 0: never). `now` and `random` are
   * injectable for tests.
   */
  constructor(
    readonly max: number,
    private readonly observe: RetryObserver = () => undefined,
    private readonly now: () => number = Date.now,
    private readonly random: () => number = Math.random,
  ) {
    this.state = emptyBudget(now());
  }

  /** An upstream request (first attempt or retry) is going out. */
  sent(): void {
    this.state = countRequest(rolled(this.state, this.now()));
  }

  /**
   * After an attempt of a `method` request that `retried` retries came before, which ended with
   * transit failure `reason` (undefined: none): send it again after `delayMs`, or stop.
   */
  decide(method: string, retried: number, reason: TransitReason | undefined): RetryDecision {
    if (reason === undefined || !idempotent(method) || retried >= this.max) return STOP;
    const now = this.now();
    const state = rolled(this.state, now);
    if (!budgetAllows(state, now)) {
      this.state = state;
      this.observe(reason, 'budget_exhausted');
      return STOP;
    }
    this.state = countRetry(state);
    this.observe(reason, 'retried');
    return { kind: 'retry', delayMs: backoffMs(this.random()) };
  }
}
