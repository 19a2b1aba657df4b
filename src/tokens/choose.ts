/**
 * Pure token choice for the pool (issue 4 groundwork; not wired into the request path yet).
 *
 * Rule: among usable tokens, take the one whose quota left after in-flight reservations is the
 * largest per second until its reset ("use it or lose it": a token resetting in 2 minutes may
 * spend faster than one resetting in 59). A revalidation prefers the token that stored the entry,
 * because its ETag only matches for that credential; another token is used only when that one is
 * dead, paused (secondary limit), exhausted or at its concurrency cap.
 */

export interface TokenState {
  readonly name: string;
  /** Last x-ratelimit-remaining seen (or from /rate_limit). */
  readonly remaining: number;
  /** x-ratelimit-reset, epoch seconds. */
  readonly reset: number;
  /** Requests in flight on this token (each reserves one unit). */
  readonly inFlight: number;
  /** 401 seen: never used again. */
  readonly dead: boolean;
  /** Secondary limit: not used before this time (epoch ms), 0 when not paused. */
  readonly pausedUntil: number;
}

export type Choice =
  | { kind: 'token'; name: string; switched: boolean }
  /** No token can take a request now; `retryAt` (epoch ms) is the earliest one will. */
  | { kind: 'none'; retryAt: number | undefined };

export interface ChooseInput {
  tokens: readonly TokenState[];
  /** Epoch ms. */
  now: number;
  /** Per-token concurrency cap. */
  maxInFlight: number;
  /** Token that stored the entry being revalidated, if any. */
  prefer?: string | undefined;
}

/** Quota a token can still hand out now: its window has reset, or remaining minus reservations. */
export function available(t: TokenState, nowMs: number, limitAfterReset = Infinity): number {
  const remaining = nowMs >= t.reset * 1000 ? limitAfterReset : t.remaining;
  return remaining - t.inFlight;
}

export function usable(t: TokenState, nowMs: number, maxInFlight: number): boolean {
  return !t.dead && t.pausedUntil <= nowMs && t.inFlight < maxInFlight && available(t, nowMs) > 0;
}

/** Spend rate the token can afford: units left per second until its reset. */
export function score(t: TokenState, nowMs: number): number {
  const secondsLeft = Math.max(1, t.reset - nowMs / 1000);
  return available(t, nowMs) / secondsLeft;
}

export function chooseToken(i: ChooseInput): Choice {
  if (i.prefer !== undefined) {
    const p = i.tokens.find((t) => t.name === i.prefer);
    if (p !== undefined && usable(p, i.now, i.maxInFlight)) return { kind: 'token', name: p.name, switched: false };
  }
  let best: TokenState | undefined;
  let bestScore = -Infinity;
  for (const t of i.tokens) {
    if (!usable(t, i.now, i.maxInFlight)) continue;
    const s = score(t, i.now);
    if (s > bestScore || (s === bestScore && best !== undefined && t.name < best.name)) {
      best = t;
      bestScore = s;
    }
  }
  if (best !== undefined) {
    return { kind: 'token', name: best.name, switched: i.prefer !== undefined && i.tokens.some((t) => t.name === i.prefer) };
  }
  return { kind: 'none', retryAt: earliestRetry(i.tokens, i.now) };
}

/**
 * When the first non-dead token can take a request again (epoch ms): the end of its pause, and
 * its reset when its quota is spent. A token held back only by its concurrency cap frees up as
 * soon as a request finishes, so it counts as "now".
 */
export function earliestRetry(tokens: readonly TokenState[], nowMs: number): number | undefined {
  let at: number | undefined;
  for (const t of tokens) {
    if (t.dead) continue;
    const quotaAt = available(t, nowMs) > 0 ? nowMs : t.reset * 1000;
    const when = Math.max(nowMs, quotaAt, t.pausedUntil);
    if (at === undefined || when < at) at = when;
  }
  return at;
}
