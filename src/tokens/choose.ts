/**
 * Pure token choice for the pool: which token the next request spends, or why none can.
 *
 * Rule: among usable tokens, take the one whose quota left after in-flight reservations is the
 * largest per second until its reset ("use it or lose it": a token resetting in 2 minutes may
 * spend faster than one resetting in 59). Ties go to the lower name, so choices are repeatable.
 * A revalidation prefers the token that stored the entry, because its ETag only matches for that
 * credential; another token is used only when that one is dead, paused (secondary limit),
 * exhausted or at its concurrency cap.
 *
 * Each in-flight request reserves one unit. When no token is usable but a request in flight may
 * still give a unit back (a free 304, a failure) or a concurrency slot frees up, the answer is
 * "wait"; when every token is spent, paused or dead, it is "none" with the earliest time one
 * comes back.
 */

/** Slack after a token's reset time before its window is taken as renewed (clock skew). */
export const RESET_GRACE_MS = 1_000;

export interface TokenState {
  readonly name: string;
  /** x-ratelimit-limit: the window's size, and what a renewed window holds. */
  readonly limit: number;
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
  /** Nothing usable now, but a request in flight will free a slot or give back a unit. */
  | { kind: 'wait' }
  /** No token can take a request; `retryAt` (epoch ms) is the earliest one will, if any will. */
  | { kind: 'none'; retryAt: number | undefined };

export interface ChooseInput {
  tokens: readonly TokenState[];
  /** Epoch ms. */
  now: number;
  /** Per-token concurrency cap. */
  maxInFlight: number;
  /** Token that stored the entry being revalidated, if any. */
  prefer?: string | undefined;
  /** Tokens this request already tried (a retry never goes back to them). */
  exclude?: ReadonlySet<string> | undefined;
}

export function windowOver(t: TokenState, nowMs: number): boolean {
  return nowMs >= t.reset * 1000 + RESET_GRACE_MS;
}

/** Quota the token holds, before reservations: a renewed window holds its whole limit. */
export function quotaLeft(t: TokenState, nowMs: number): number {
  return windowOver(t, nowMs) ? t.limit : t.remaining;
}

/** Quota a token can still hand out now: what it holds minus in-flight reservations. */
export function available(t: TokenState, nowMs: number): number {
  return quotaLeft(t, nowMs) - t.inFlight;
}

export function usable(t: TokenState, nowMs: number, maxInFlight: number): boolean {
  return !t.dead && t.pausedUntil <= nowMs && t.inFlight < maxInFlight && available(t, nowMs) > 0;
}

/** Spend rate the token can afford: units left per second until its reset. */
export function score(t: TokenState, nowMs: number): number {
  const secondsLeft = windowOver(t, nowMs) ? 1 : Math.max(1, t.reset - nowMs / 1000);
  return available(t, nowMs) / secondsLeft;
}

export function chooseToken(i: ChooseInput): Choice {
  const excluded = (t: TokenState): boolean => i.exclude !== undefined && i.exclude.has(t.name);
  const preferred = i.prefer === undefined ? undefined : i.tokens.find((t) => t.name === i.prefer);
  if (preferred !== undefined && !excluded(preferred) && usable(preferred, i.now, i.maxInFlight)) {
    return { kind: 'token', name: preferred.name, switched: false };
  }
  let best: TokenState | undefined;
  let bestScore = -Infinity;
  for (const t of i.tokens) {
    if (excluded(t) || !usable(t, i.now, i.maxInFlight)) continue;
    const s = score(t, i.now);
    if (s > bestScore || (s === bestScore && best !== undefined && t.name < best.name)) {
      best = t;
      bestScore = s;
    }
  }
  if (best !== undefined) return { kind: 'token', name: best.name, switched: preferred !== undefined };
  const live = i.tokens.filter((t) => !excluded(t));
  if (live.some((t) => !t.dead && t.pausedUntil <= i.now && t.inFlight > 0 && quotaLeft(t, i.now) > 0)) return { kind: 'wait' };
  // The earliest return over every token, tried ones included: a token this request already
  // tried (and found spent) still comes back at its reset.
  return { kind: 'none', retryAt: earliestRetry(i.tokens, i.now) };
}

/**
 * When the first token that is not dead can take a request again (epoch ms): the end of its
 * pause, and its reset (plus the grace) when its quota is spent. Undefined when all are dead.
 */
export function earliestRetry(tokens: readonly TokenState[], nowMs: number): number | undefined {
  let at: number | undefined;
  for (const t of tokens) {
    if (t.dead) continue;
    const quotaAt = quotaLeft(t, nowMs) > 0 ? nowMs : t.reset * 1000 + RESET_GRACE_MS;
    const when = Math.max(nowMs, quotaAt, t.pausedUntil);
    if (at === undefined || when < at) at = when;
  }
  return at;
}
