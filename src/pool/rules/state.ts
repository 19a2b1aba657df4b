/**
 * The pure rules of one token's numbers, written once. The in-process pool (local-pool.ts) applies
 * them directly; the shared budget's Lua scripts (shared-scripts.ts) are their twin inside Redis,
 * and test/integration/pool-parity.test.ts runs both over one table of cases.
 *
 * - window: a token holds `remaining` until its reset (plus a grace for clock skew), then its whole
 *   `limit` again.
 * - reserve: each request in flight holds one unit. A token takes one more while it is not dead,
 *   not paused, under its concurrency cap, and holds quota beyond what is reserved.
 * - resources: a token has one window per rate-limit resource (rate-limit.ts): core, search,
 *   code_search, graphql, ... The numbers below (`TokenNumbers`) are a token as seen in one
 *   resource: that resource's window, plus the token's pause and death, which are the
 *   credential's and hold in every resource. An answer's numbers and a spent limit go to the
 *   resource the answer names (`x-ratelimit-resource`), else to the request's: a search answered
 *   403 with remaining 0 spends search, never core.
 * - observe: answers can arrive out of order, so within one window the lowest remaining wins; a
 *   later reset starts a new window; an earlier one is a late answer from an old window and is
 *   ignored.
 * - react and settle: a 401 on a request changes nothing until GET /rate_limit confirms it; a
 *   confirmed one kills the token (the shared flag for DEAD_FLAG_TTL_MS), a probe that answers
 *   again revives it; a spent primary limit zeroes the resource until its reset (or, with no
 *   usable reset, for NO_RESET_FALLBACK_S); a secondary limit pauses the token in every resource
 *   (GitHub's secondary limits are per credential: Retry-After, else 60 s doubling per repeat,
 *   capped at 1 h).
 * - unlimited: an upstream may apply no rate limit at all (GitHub Enterprise Server's default:
 *   GET /rate_limit answers 404 "Rate limiting is not enabled." and answers carry no x-ratelimit-*).
 *   Such a token holds quota without end in every resource (only its pause, death and concurrency
 *   cap stop it). It becomes so when GET /rate_limit says so (`unlimited`, which also revives it),
 *   or when a served answer carries no rate-limit header at all while the token has no numbers in
 *   the request's resource (`numberless`); numbers seen later, or a spent limit, end it.
 * - slowdown: secondary limits on two tokens within a minute cut the whole-upstream concurrency.
 *
 * No I/O and no timers: every function takes the time as an argument (epoch ms).
 */
import { resourceNamed, type Resource } from './rate-limit.js';
import type { RateObservation, TokenNumbers, TokenState, Verdict } from './types.js';

/** Slack after a token's reset time before its window is taken as renewed (clock skew). */
export const RESET_GRACE_MS = 1_000;

/** How long a spent token waits when the upstream gave no usable reset, or a window renewed unseen. */
export const NO_RESET_FALLBACK_S = 60;

/**
 * How long the shared dead flag lasts (Redis): a confirmed 401 keeps the token out of every
 * replica this long, and each re-probe that meets a 401 again renews it. A restart, or a token
 * the upstream accepts again, therefore never inherits a permanent flag.
 */
export const DEAD_FLAG_TTL_MS = 15 * 60_000;

/** A token never seen holds one unit: one request at a time learns its real numbers. */
export const UNSEEN: TokenNumbers = Object.freeze({
  limit: 1,
  remaining: 1,
  reset: 0,
  pausedUntil: 0,
  dead: false,
  known: false,
  unlimited: false,
});

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
    unlimited: token.unlimited,
  };
}

// ---------------------------------------------------------------------------------------------
// Window and reservations

type Window = Pick<TokenNumbers, 'limit' | 'remaining' | 'reset'>;
/** A token's numbers with its reservations: what reserving looks at. */
export type Reservable = Pick<TokenState, 'limit' | 'remaining' | 'reset' | 'inFlight' | 'dead' | 'pausedUntil' | 'unlimited'>;

export function windowOver(token: Pick<TokenNumbers, 'reset'>, nowMs: number): boolean {
  return nowMs >= token.reset * 1000 + RESET_GRACE_MS;
}

/** Quota the token holds, before reservations: a renewed window holds its whole limit. */
export function quotaLeft(token: Window, nowMs: number): number {
  return windowOver(token, nowMs) ? token.limit : token.remaining;
}

/** Whether the token holds quota now (before reservations): an unlimited one always does. */
export function hasQuota(token: Window & { readonly unlimited?: boolean | undefined }, nowMs: number): boolean {
  return token.unlimited === true || quotaLeft(token, nowMs) > 0;
}

/** Quota a token can still hand out now: what it holds minus in-flight reservations. */
export function available(token: Reservable, nowMs: number): number {
  return quotaLeft(token, nowMs) - token.inFlight;
}

/**
 * Whether the token may take one more reservation in a resource: `inFlight` counts those it holds
 * there (against the quota), `concurrent` those over every resource (against the per-token cap).
 */
export function canReserve(token: Reservable & { readonly concurrent?: number }, nowMs: number, maxInFlight: number): boolean {
  return (
    !token.dead &&
    token.pausedUntil <= nowMs &&
    (token.concurrent ?? token.inFlight) < maxInFlight &&
    (token.unlimited === true || available(token, nowMs) > 0)
  );
}

/**
 * After a refused reservation: whether the token's units are only held by requests in flight
 * (they come back soon, so asking again is worth it) rather than it being dead, paused or spent.
 */
export function heldByOthers(token: TokenNumbers, reserved: number, nowMs: number): boolean {
  return !token.dead && token.pausedUntil <= nowMs && hasQuota(token, nowMs) && reserved > 0;
}

// ---------------------------------------------------------------------------------------------
// Observe

/**
 * Merges an observation into a token's window of `resource` (see the module comment); `known` is
 * false for an unseen window. An observation of another resource leaves it as it is.
 */
export function mergeObservation(
  token: Window,
  observation: RateObservation,
  known: boolean,
  resource: Resource = 'core',
): { limit: number; remaining: number; reset: number } {
  if (observation.resource !== resource) return { limit: token.limit, remaining: token.remaining, reset: token.reset };
  if (!known || observation.reset > token.reset)
    return { limit: observation.limit, remaining: observation.remaining, reset: observation.reset };
  if (observation.reset < token.reset) return { limit: token.limit, remaining: token.remaining, reset: token.reset };
  return { limit: observation.limit, remaining: Math.min(token.remaining, observation.remaining), reset: token.reset };
}

/**
 * A token's numbers in `resource` after an answer's x-ratelimit-* (unchanged by an observation of
 * another resource). Numbers seen mean the upstream applies rate limits: the token is no longer unlimited.
 */
export function observe(token: TokenNumbers, observation: RateObservation | undefined, resource: Resource = 'core'): TokenNumbers {
  if (observation === undefined || observation.resource !== resource) return numbersOf(token);
  const merged = mergeObservation(token, observation, token.known, resource);
  return {
    limit: merged.limit,
    remaining: merged.remaining,
    reset: merged.reset,
    pausedUntil: token.pausedUntil,
    dead: token.dead,
    known: true,
    unlimited: false,
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

/**
 * What a settlement does: an answer's verdict, `alive` when GET /rate_limit answered a token (a
 * dead one comes back), or `unlimited` when it answered that rate limiting is off (alive too).
 */
export type SettleKind = Verdict['kind'] | 'alive' | 'unlimited';

/** What one answer does to a token's shared numbers: the same for every holder of the pool. */
export interface Settlement {
  /** The resource whose window the answer speaks of: the one it names, else the request's. */
  readonly resource: Resource;
  /** The answer's x-ratelimit-* (of `resource`; undefined when it named no resource GitHub has). */
  readonly observation: RateObservation | undefined;
  readonly verdict: SettleKind;
  /** exhausted: the reset the upstream gave (epoch s), if any. */
  readonly exhaustedReset: number | undefined;
  /** secondary: the end of the pause (epoch ms); 0 otherwise. */
  readonly pauseUntil: number;
  /** dead: until when the shared dead flag holds (epoch ms); 0 otherwise. */
  readonly deadUntil: number;
  /**
   * ok: the answer was served (below 500) and carried no rate-limit header at all: a token with no
   * numbers in the resource is taken as unlimited. False otherwise.
   */
  readonly numberless: boolean;
}

/**
 * Reaction to an answer to a request in `resource` (core by default): its settlement, and the
 * token's count of secondary limits in a row (one more after a secondary limit, back to 0 after a
 * success, unchanged otherwise), which each holder keeps for itself and which doubles the pause.
 * `silent`: the answer carried no x-ratelimit-limit, -remaining, -reset or -used header at all
 * (rate-limit.ts `mentionsRateLimit`; garbage values are not silence).
 */
export function react(
  status: number,
  verdict: Verdict | { kind: 'alive' } | { kind: 'unlimited' },
  observation: RateObservation | undefined,
  repeats: number,
  nowMs: number,
  resource: Resource = 'core',
  silent = false,
): { settlement: Settlement; repeats: number } {
  const next = verdict.kind === 'secondary' ? repeats + 1 : verdict.kind === 'ok' && status < 400 ? 0 : repeats;
  // A 401's numbers are not the token's: the request was not taken as the token's (GitHub reports
  // another budget then), and an upstream could feed any numbers that way.
  const seen = verdict.kind === 'unauthorized' ? undefined : observation;
  const named = seen === undefined ? undefined : resourceNamed(seen.resource);
  return {
    repeats: next,
    settlement: {
      resource: named ?? resource,
      observation: named === undefined || seen === undefined ? undefined : named === seen.resource ? seen : { ...seen, resource: named },
      verdict: verdict.kind,
      exhaustedReset: verdict.kind === 'exhausted' ? verdict.reset : undefined,
      pauseUntil: verdict.kind === 'secondary' ? nowMs + secondaryPauseMs(verdict.retryAfterMs, next) : 0,
      deadUntil: verdict.kind === 'dead' ? nowMs + DEAD_FLAG_TTL_MS : 0,
      numberless: silent && verdict.kind === 'ok' && status < 500,
    },
  };
}

/** When a spent token comes back: the later of its reset and the given one, or the fallback when that is past. */
export function exhaustedUntil(reset: number, given: number | undefined, nowMs: number): number {
  const until = given !== undefined && given > reset ? given : reset;
  return until * 1000 <= nowMs ? fallbackReset(nowMs) : until;
}

/**
 * A token's numbers in the settlement's resource after an answer (`token` is the token as seen in
 * that resource): observe its x-ratelimit-*, then apply its verdict.
 */
export function settle(token: TokenNumbers, settlement: Settlement, nowMs: number): TokenNumbers {
  const seen = observe(token, settlement.observation, settlement.resource);
  switch (settlement.verdict) {
    case 'ok':
      return settlement.numberless && !seen.known && !seen.unlimited ? { ...seen, unlimited: true } : seen;
    case 'unauthorized':
      return seen;
    case 'alive':
      return { ...seen, dead: false };
    case 'unlimited':
      return { ...seen, dead: false, unlimited: true };
    case 'dead':
      return { ...seen, dead: true };
    case 'exhausted': {
      const reset = exhaustedUntil(seen.reset, settlement.exhaustedReset, nowMs);
      return { ...seen, remaining: 0, reset, known: true, unlimited: false };
    }
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
