/**
 * The pure rules of one token's numbers, written once. The in-process pool (local-pool.ts) applies
 * them directly; the shared budget's Lua scripts (shared-scripts.ts) are their twin inside Redis,
 * and test/integration/pool-parity.test.ts runs both over one table of cases.
 *
 * - window: a token holds `remaining` until its reset (plus a grace for clock skew), then its whole
 *   `limit` again.
 * - reserve: each request in flight holds one unit. A token takes one more while it is not dead,
 *   not paused, under its concurrency cap, and holds quota beyond what is reserved.
 * - observe: answers can arrive out of order, so within one window the lowest remaining wins; a
 *   later reset starts a new window; an earlier one is a late answer from an old window and is
 *   ignored. Only the `core` resource is tracked (search and GraphQL have windows of their own).
 * - react and settle: a 401 kills the token; a spent primary limit zeroes it until its reset (or,
 *   with no usable reset, for NO_RESET_FALLBACK_S); a secondary limit pauses it (Retry-After, else
 *   60 s doubling per repeat, capped at 1 h).
 * - slowdown: secondary limits on two tokens within a minute cut the whole-upstream concurrency.
 *
 * No I/O and no timers: every function takes the time as an argument (epoch ms).
 */
import type { RateObservation, TokenNumbers, TokenState, Verdict } from './types.js';

/** Slack after a token's reset time before its window is taken as renewed (clock skew). */
export const RESET_GRACE_MS = 1_000;

/** How long a spent token waits when the upstream gave no usable reset, or a window renewed unseen. */
export const NO_RESET_FALLBACK_S = 60;

/** A token never seen holds one unit: one request at a time learns its real numbers. */
export const UNSEEN: TokenNumbers = Object.freeze({ limit: 1, remaining: 1, reset: 0, pausedUntil: 0, dead: false, known: false });

/** The reset assumed when none is usable: NO_RESET_FALLBACK_S from now (epoch seconds). */
export function fallbackReset(nowMs: number): number {
  return Math.ceil(nowMs / 1000) + NO_RESET_FALLBACK_S;
}

/** Just the shared numbers of a token (whatever else the holder keeps beside them). */
export function numbersOf(token: TokenNumbers): TokenNumbers {
  return {
    limit: token.limit,
    remaining: token.remaining,
    reset: token.reset,
    pausedUntil: token.pausedUntil,
    dead: token.dead,
    known: token.known,
  };
}

// ---------------------------------------------------------------------------------------------
// Window and reservations

type Window = Pick<TokenNumbers, 'limit' | 'remaining' | 'reset'>;
/** A token's numbers with its reservations: what reserving looks at. */
export type Reservable = Pick<TokenState, 'limit' | 'remaining' | 'reset' | 'inFlight' | 'dead' | 'pausedUntil'>;

export function windowOver(token: Pick<TokenNumbers, 'reset'>, nowMs: number): boolean {
  return nowMs >= token.reset * 1000 + RESET_GRACE_MS;
}

/** Quota the token holds, before reservations: a renewed window holds its whole limit. */
export function quotaLeft(token: Window, nowMs: number): number {
  return windowOver(token, nowMs) ? token.limit : token.remaining;
}

/** Quota a token can still hand out now: what it holds minus in-flight reservations. */
export function available(token: Reservable, nowMs: number): number {
  return quotaLeft(token, nowMs) - token.inFlight;
}

/** Whether the token may take one more reservation (`inFlight` counts those it holds). */
export function canReserve(token: Reservable, nowMs: number, maxInFlight: number): boolean {
  return !token.dead && token.pausedUntil <= nowMs && token.inFlight < maxInFlight && available(token, nowMs) > 0;
}

/**
 * After a refused reservation: whether the token's units are only held by requests in flight
 * (they come back soon, so asking again is worth it) rather than it being dead, paused or spent.
 */
export function heldByOthers(token: TokenNumbers, reserved: number, nowMs: number): boolean {
  return !token.dead && token.pausedUntil <= nowMs && quotaLeft(token, nowMs) > 0 && reserved > 0;
}

// ---------------------------------------------------------------------------------------------
// Observe

/** Merges an observation into a token's window (see the module comment); `known` is false for an unseen token. */
export function mergeObservation(
  token: Window,
  observation: RateObservation,
  known: boolean,
): { limit: number; remaining: number; reset: number } {
  if (observation.resource !== 'core') return { limit: token.limit, remaining: token.remaining, reset: token.reset };
  if (!known || observation.reset > token.reset)
    return { limit: observation.limit, remaining: observation.remaining, reset: observation.reset };
  if (observation.reset < token.reset) return { limit: token.limit, remaining: token.remaining, reset: token.reset };
  return { limit: observation.limit, remaining: Math.min(token.remaining, observation.remaining), reset: token.reset };
}

/** A token's numbers after an answer's x-ratelimit-* (unchanged without a `core` observation). */
export function observe(token: TokenNumbers, observation: RateObservation | undefined): TokenNumbers {
  if (observation === undefined || observation.resource !== 'core') return numbersOf(token);
  const merged = mergeObservation(token, observation, token.known);
  return {
    limit: merged.limit,
    remaining: merged.remaining,
    reset: merged.reset,
    pausedUntil: token.pausedUntil,
    dead: token.dead,
    known: true,
  };
}

// ---------------------------------------------------------------------------------------------
// React and settle

export const SECONDARY_BASE_MS = 60_000;
export const SECONDARY_MAX_MS = 60 * 60_000;

/** Pause after a secondary limit: the upstream's Retry-After, else 60 s doubling per repeat (capped at 1 h). */
export function secondaryPauseMs(retryAfter: number | undefined, repeats: number): number {
  if (retryAfter !== undefined) return Math.min(Math.max(retryAfter, 1000), SECONDARY_MAX_MS);
  return Math.min(SECONDARY_BASE_MS * 2 ** Math.max(0, repeats - 1), SECONDARY_MAX_MS);
}

/** What one answer does to a token's shared numbers: the same for every holder of the pool. */
export interface Settlement {
  /** The answer's x-ratelimit-* (only `core` counts). */
  readonly observation: RateObservation | undefined;
  readonly verdict: Verdict['kind'];
  /** exhausted: the reset the upstream gave (epoch s), if any. */
  readonly exhaustedReset: number | undefined;
  /** secondary: the end of the pause (epoch ms); 0 otherwise. */
  readonly pauseUntil: number;
}

/**
 * Reaction to an answer: its settlement, and the token's count of secondary limits in a row (one
 * more after a secondary limit, back to 0 after a success, unchanged otherwise), which each holder
 * keeps for itself and which doubles the pause.
 */
export function react(
  status: number,
  verdict: Verdict,
  observation: RateObservation | undefined,
  repeats: number,
  nowMs: number,
): { settlement: Settlement; repeats: number } {
  const next = verdict.kind === 'secondary' ? repeats + 1 : verdict.kind === 'ok' && status < 400 ? 0 : repeats;
  return {
    repeats: next,
    settlement: {
      observation,
      verdict: verdict.kind,
      exhaustedReset: verdict.kind === 'exhausted' ? verdict.reset : undefined,
      pauseUntil: verdict.kind === 'secondary' ? nowMs + secondaryPauseMs(verdict.retryAfterMs, next) : 0,
    },
  };
}

/** When a spent token comes back: the later of its reset and the given one, or the fallback when that is past. */
export function exhaustedUntil(reset: number, given: number | undefined, nowMs: number): number {
  const until = given !== undefined && given > reset ? given : reset;
  return until * 1000 <= nowMs ? fallbackReset(nowMs) : until;
}

/** A token's numbers after an answer: observe its x-ratelimit-*, then apply its verdict. */
export function settle(token: TokenNumbers, settlement: Settlement, nowMs: number): TokenNumbers {
  const seen = observe(token, settlement.observation);
  switch (settlement.verdict) {
    case 'ok':
      return seen;
    case 'dead':
      return { ...seen, dead: true };
    case 'exhausted':
      return { ...seen, remaining: 0, reset: exhaustedUntil(seen.reset, settlement.exhaustedReset, nowMs), known: true };
    case 'secondary':
      return { ...seen, pausedUntil: Math.max(seen.pausedUntil, settlement.pauseUntil) };
  }
}

// ---------------------------------------------------------------------------------------------
// Slowdown

/** Window in which secondary limits on several tokens slow the whole upstream down. */
export const SLOWDOWN_WINDOW_MS = 60_000;

/**
 * Whole-upstream concurrency cap after recent secondary limits: the configured cap, or a quarter
 * of it (at least 1) while two or more distinct tokens hit a secondary limit within the last minute.
 */
export function upstreamConcurrency(max: number, hits: ReadonlyArray<{ at: number; token: string }>, nowMs: number): number {
  const recent = new Set<string>();
  for (const hit of hits) if (nowMs - hit.at < SLOWDOWN_WINDOW_MS) recent.add(hit.token);
  return recent.size >= 2 ? Math.max(1, Math.floor(max / 4)) : max;
}
