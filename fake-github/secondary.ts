/**
 * Secondary rate limits: scripted failures (POST /__fake/secondary makes the next N matching API
 * requests fail) and an optional real concurrency limit (`enforceConcurrency`). A scripted rule
 * with status 200 is GraphQL's other form of a secondary limit (a 200 whose `errors` say
 * RATE_LIMITED): it matches POST /graphql calls only.
 */

export interface SecondaryRule {
  /** Failures still to produce. */
  remaining: number;
  /** 200: a GraphQL RATE_LIMITED answer (GraphQL calls only). */
  status: 200 | 403 | 429;
  /** Seconds for `retry-after`; null sends no retry-after header. */
  retryAfter: number | null;
  /** Only requests of this token (value or login), or `anonymous`; null = every request. */
  token: string | null;
}

export interface SecondaryFailure {
  status: 200 | 403 | 429;
  retryAfter: number | null;
  reason: 'scripted' | 'concurrency';
}

/** Concurrency-limit answers: 403 with retry-after 1 (documented). */
export const CONCURRENCY_FAILURE: SecondaryFailure = { status: 403, retryAfter: 1, reason: 'concurrency' };

export class Secondary {
  rule: SecondaryRule | null = null;

  set(rule: SecondaryRule | null): void {
    this.rule = rule !== null && rule.remaining > 0 ? rule : null;
  }

  reset(): void {
    this.rule = null;
  }

  /**
   * Whether this request must fail; consumes one scripted failure when it does.
   * `matches(selector)` tells whether the request's credential matches a token selector;
   * `graphql`, whether it is a GraphQL call (the only ones a status-200 rule fails).
   */
  check(matches: (selector: string) => boolean, graphql = false): SecondaryFailure | null {
    const rule = this.rule;
    if (rule === null) return null;
    if (rule.status === 200 && !graphql) return null;
    if (rule.token !== null && !matches(rule.token)) return null;
    rule.remaining--;
    if (rule.remaining <= 0) this.rule = null;
    return { status: rule.status, retryAfter: rule.retryAfter, reason: 'scripted' };
  }

  describe(): Record<string, unknown> {
    const rule = this.rule;
    return rule === null
      ? { count: 0, status: null, retryAfter: null, token: null }
      : { count: rule.remaining, status: rule.status, retryAfter: rule.retryAfter, token: rule.token };
  }
}
