/**
 * Pure token choice for the pool: which token the next request spends, or why none can. The
 * tokens are given as seen in the request's rate-limit resource (state.ts), so a spent search
 * budget never stands in the way of a core request.
 *
 * Rule: among usable tokens, take the one whose quota left after in-flight reservations is the
 * largest per second until its reset ("use it or lose it": a token resetting in 2 minutes may
 * spend faster than one resetting in 59). Ties go to the lower name, so choices are repeatable.
 * A token without rate limit (state.ts: unlimited, GitHub Enterprise Server's default) costs no
 * quota: it goes before every limited one, and among such tokens the least loaded (fewest requests
 * in flight) is chosen.
 * A revalidation prefers the token that stored the entry, because its ETag only matches for that
 * credential; another token is used only when that one is dead, paused (secondary limit),
 * exhausted or at its concurrency cap.
 *
 * Each in-flight request reserves one unit. When no token is usable but a request in flight may
 * still give a unit back (a free 304, a failure) or a concurrency slot frees up, the answer is
 * "wait"; when every token is spent, paused or dead, it is "none" with the earliest time one
 * comes back. Whether one token can take a request is state.ts's rule (`canReserve`).
 */
import { available, canReserve, hasQuota, RESET_GRACE_MS, windowOver } from './state.js';
import type { TokenState } from './types.js';

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

/** The score of an unlimited token with nothing in flight: above any limited token's (no window holds this many units). */
const UNLIMITED_SCORE = Number.MAX_SAFE_INTEGER;

/**
 * Spend rate the token can afford: units left per second until its reset. An unlimited token
 * scores above them all, less one per request it has in flight (the least loaded wins).
 */
export function score(token: TokenState, nowMs: number): number {
  if (token.unlimited === true) return UNLIMITED_SCORE - (token.concurrent ?? token.inFlight);
  const secondsLeft = windowOver(token, nowMs) ? 1 : Math.max(1, token.reset - nowMs / 1000);
  return available(token, nowMs) / secondsLeft;
}

export function chooseToken(input: ChooseInput): Choice {
  const excluded = (t: TokenState): boolean => input.exclude !== undefined && input.exclude.has(t.name);
  const preferred = input.prefer === undefined ? undefined : input.tokens.find((t) => t.name === input.prefer);
  if (preferred !== undefined && !excluded(preferred) && canReserve(preferred, input.now, input.maxInFlight)) {
    return { kind: 'token', name: preferred.name, switched: false };
  }
  let best: TokenState | undefined;
  let bestScore = -Infinity;
  for (const token of input.tokens) {
    if (excluded(token) || !canReserve(token, input.now, input.maxInFlight)) continue;
    const tokenScore = score(token, input.now);
    if (tokenScore > bestScore || (tokenScore === bestScore && best !== undefined && token.name < best.name)) {
      best = token;
      bestScore = tokenScore;
    }
  }
  if (best !== undefined) return { kind: 'token', name: best.name, switched: preferred !== undefined };
  const live = input.tokens.filter((t) => !excluded(t));
  // Units or slots held by requests in flight (in any resource: they share the per-token cap) come back soon.
  if (live.some((t) => !t.dead && t.pausedUntil <= input.now && (t.concurrent ?? t.inFlight) > 0 && hasQuota(t, input.now)))
    return { kind: 'wait' };
  // The earliest return over every token, tried ones included: a token this request already
  // tried (and found spent) still comes back at its reset.
  return { kind: 'none', retryAt: earliestRetry(input.tokens, input.now) };
}

/**
 * When the first token that is not dead can take a request again (epoch ms): the end of its
 * pause, and its reset (plus the grace) when its quota is spent. Undefined when all are dead.
 */
export function earliestRetry(tokens: readonly TokenState[], nowMs: number): number | undefined {
  let at: number | undefined;
  for (const token of tokens) {
    if (token.dead) continue;
    const quotaAt = hasQuota(token, nowMs) ? nowMs : token.reset * 1000 + RESET_GRACE_MS;
    const when = Math.max(nowMs, quotaAt, token.pausedUntil);
    if (at === undefined || when < at) at = when;
  }
  return at;
}
