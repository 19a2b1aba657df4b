/**
 * Pacing under GitHub's secondary limits (pure). Every upstream request a pool token sends spends
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

/** The two budgets of a token: REST endpoints, and GraphQL (GitHub counts them apart). */
export type PaceKind = 'rest' | 'graphql';

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
