/**
 * Secondary rate limits: scripted failures (POST /__fake/secondary makes the next N matching API
 * requests fail), an optional real concurrency limit (`enforceConcurrency`) and optional real
 * points per minute per credential (`enforcePoints`): GitHub's table, a REST GET, HEAD or OPTIONS
 * costs 1 point and any other method 5, out of 900 a minute; a GraphQL call 1 (GitHub counts a
 * mutation 5: the fake counts every call as a query) out of 2,000. The minute slides: a request whose points would take the last 60 s over the limit
 * is refused (403, retry-after: the seconds until enough points leave the window), and costs none.
 * A scripted rule with status 200 is GraphQL's other form of a secondary limit (a 200 whose
 * `errors` say RATE_LIMITED): it matches POST /graphql calls only.
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
  reason: 'scripted' | 'concurrency' | 'points';
}

/** Concurrency-limit answers: 403 with retry-after 1 (documented). */
export const CONCURRENCY_FAILURE: SecondaryFailure = { status: 403, retryAfter: 1, reason: 'concurrency' };

/** The two points budgets of a credential. */
export type PointsKind = 'rest' | 'graphql';

const MINUTE_MS = 60_000;

/** GitHub's secondary-limit points of a request (a GraphQL mutation is a write). */
export function requestPoints(method: string, graphqlMutation = false): number {
  if (graphqlMutation) return 5;
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS' ? 1 : 5;
}

export class Secondary {
  rule: SecondaryRule | null = null;
  /** Points spent per credential and budget in the last minute: (time, points), oldest first. */
  private readonly logs = new Map<string, Array<{ at: number; points: number }>>();
  /** Points accepted since the last reset, per budget; answers refused for points. */
  private readonly spent: Record<PointsKind, number> = { rest: 0, graphql: 0 };
  private refusedForPoints = 0;

  /**
   * Spends `points` of `credential`'s budget `kind` (limit a minute) at `now`, or refuses: then
   * the seconds until they fit.
   */
  spendPoints(credential: string, kind: PointsKind, points: number, limit: number, now: number): SecondaryFailure | null {
    const key = `${kind}:${credential}`;
    const log = (this.logs.get(key) ?? []).filter((entry) => entry.at > now - MINUTE_MS);
    let sum = log.reduce((total, entry) => total + entry.points, 0);
    if (sum + points <= limit) {
      log.push({ at: now, points });
      this.logs.set(key, log);
      this.spent[kind] += points;
      return null;
    }
    this.logs.set(key, log);
    this.refusedForPoints++;
    let freeAt = now + MINUTE_MS;
    for (const entry of log) {
      sum -= entry.points;
      if (sum + points <= limit) {
        freeAt = entry.at + MINUTE_MS;
        break;
      }
    }
    return { status: 403, retryAfter: Math.max(1, Math.ceil((freeAt - now) / 1000)), reason: 'points' };
  }

  set(rule: SecondaryRule | null): void {
    this.rule = rule !== null && rule.remaining > 0 ? rule : null;
  }

  reset(): void {
    this.rule = null;
    this.logs.clear();
    this.spent.rest = 0;
    this.spent.graphql = 0;
    this.refusedForPoints = 0;
  }

  /** Points accepted since the last reset, and answers refused for want of them (GET /__fake/secondary). */
  points(): { rest: number; graphql: number; refused: number } {
    return { ...this.spent, refused: this.refusedForPoints };
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
