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
 *
 * When a chosen token may send, under GitHub's secondary limits (its points), is below.
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

/*
 * Pacing under GitHub's secondary limits. Every upstream request a pool token sends spends
 * points (GitHub's table: a REST GET, HEAD or OPTIONS costs 1, a write 5; a GraphQL query 1 and a
 * mutation 5, counted in a budget of their own). A token never sends more than its budget in any
 * sliding minute, and never more than a sixth of it plus one in any 10 s window.
 *
 * The model is a sliding log of what the token sent (time, points). A request may go at `t` when
 *   sum(points sent in (t - MINUTE_WINDOW_MS, t]) + cost <= budget, and
 *   sum(points sent in (t - BURST_WINDOW_MS, t]) + cost <= burstBudget(budget).
 * Both hold by construction for every window ending at a send, and a window's sum only grows at
 * sends, so they hold for every window (test/unit/pacing-rule.test.ts checks it with fast-check).
 * The minute window is MINUTE_MARGIN_MS longer than GitHub's, so that a request that leaves a
 * little later than another never lands in the same upstream minute. The log is exact, so steady
 * load reaches the whole budget (a token bucket that keeps both bounds loses a cost's worth of
 * burst per 10 s: about 3 % at 900 points).
 *
 * Background work (refresh-ahead, stale-while-revalidate) keeps a reserve free for clients: it may
 * only spend while a tenth of each window's budget stays unspent after it.
 */

export const READ_POINTS = 1;
export const WRITE_POINTS = 5;
export const MINUTE_WINDOW_MS = 60_000;
/** Slack on the minute window: latency between this process and the upstream's clock. */
export const MINUTE_MARGIN_MS = 250;
export const BURST_WINDOW_MS = 10_000;
/** What a log must keep: everything the longer window can still see. */
export const LOG_SPAN_MS = MINUTE_WINDOW_MS + MINUTE_MARGIN_MS;

/** One request sent: when (epoch ms), its points, and the consumer it was for (consumer keys on). */
export interface PaceEntry {
  readonly at: number;
  readonly points: number;
  readonly consumer?: string | undefined;
}

/**
 * GitHub's secondary-limit cost of a request: 1 for GET, HEAD and OPTIONS, 5 for a write; a GraphQL
 * call (a POST) costs 1 as a query, 5 as a mutation.
 */
export function pointsOf(method: string, graphql?: { mutation: boolean }): number {
  if (graphql !== undefined) return graphql.mutation ? WRITE_POINTS : READ_POINTS;
  const upper = method.toUpperCase();
  return upper === 'GET' || upper === 'HEAD' || upper === 'OPTIONS' ? READ_POINTS : WRITE_POINTS;
}

/** The most a token may send in any 10 s window: a sixth of the minute's budget, plus one. */
export function burstBudget(perMinute: number): number {
  return Math.floor(perMinute / 6) + 1;
}

/** What a request is counted as: its cost, but never more than one window holds (else it could never go). */
export function chargeOf(points: number, perMinute: number): number {
  return Math.max(1, Math.ceil(Math.min(points, perMinute, burstBudget(perMinute))));
}

/** The points background work leaves unspent in a window of `budget`: a tenth of it, at least one. */
export function backgroundReserve(budget: number): number {
  return Math.max(1, Math.floor(budget / 10));
}

/**
 * The earliest time (epoch ms, `now` or later) at which `points` fit under `limit` in windows of
 * `windowMs`, given the log (oldest first): entries leave the window one by one, oldest first.
 */
function fitsAt(log: readonly PaceEntry[], points: number, limit: number, windowMs: number, now: number): number {
  const from = now - windowMs;
  let sum = 0;
  for (const entry of log) if (entry.at > from) sum += entry.points;
  if (sum + points <= limit) return now;
  for (const entry of log) {
    if (entry.at <= from) continue;
    sum -= entry.points;
    if (sum + points <= limit) return entry.at + windowMs;
  }
  return now + windowMs; // more than the window can ever hold: chargeOf prevents it
}

/**
 * When a request of `points` may go (epoch ms; `now` when it may go at once) under a budget of
 * `perMinute`. `reserve`: leave that share unspent (background work: backgroundReserve).
 */
export function paceReadyAt(log: readonly PaceEntry[], points: number, perMinute: number, now: number, background = false): number {
  const charge = chargeOf(points, perMinute);
  const burst = burstBudget(perMinute);
  const minuteLimit = background ? perMinute - backgroundReserve(perMinute) : perMinute;
  const burstLimit = background ? burst - backgroundReserve(burst) : burst;
  return Math.max(fitsAt(log, charge, minuteLimit, LOG_SPAN_MS, now), fitsAt(log, charge, burstLimit, BURST_WINDOW_MS, now));
}

/** The log without what no window sees any more (entries at or before now - LOG_SPAN_MS). */
export function pruneLog(log: readonly PaceEntry[], now: number): PaceEntry[] {
  const from = now - LOG_SPAN_MS;
  const first = log.findIndex((entry) => entry.at > from);
  return first < 0 ? [] : log.slice(first);
}

/** Points spent in the `windowMs` up to `now`; and when the oldest of them leaves it (epoch ms), if any. */
export function spentWithin(log: readonly PaceEntry[], now: number, windowMs: number): { spent: number; frees: number | undefined } {
  const from = now - windowMs;
  let spent = 0;
  let frees: number | undefined;
  for (const entry of log) {
    if (entry.at <= from) continue;
    frees ??= entry.at + windowMs;
    spent += entry.points;
  }
  return { spent, frees };
}
