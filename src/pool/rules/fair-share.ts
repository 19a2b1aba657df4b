/**
 * Pure rules of the fair share between consumers (consumer keys on). Each consumer has a weight;
 * per rate-limit resource and per window, its share of the pool's quota is weight / (sum of the
 * weights) of that window's quota, and its reserve is `reserve_fraction` of its share.
 *
 * - share: what a consumer may count on when every consumer spends.
 * - reserve: the part of a share that is never lent out. A consumer's unspent reserve stays in the
 *   pool for it, so a consumer that arrives late in the window still finds at least its reserve.
 * - borrow: quota beyond one's own share may be spent while the pool, after this unit, still holds
 *   every other consumer's unspent reserve. An idle consumer's share is thus lent out down to its
 *   reserve, and never further. Within its share a consumer spends under the same condition, so
 *   nobody, borrower or not, ever spends another's reserve.
 * - what is left of the pool is the smaller of the window's quota minus what consumers spent (each
 *   admitted request reserves its unit at once) and what the pool's tokens still hold.
 * - caps: `max_per_hour` counts a consumer's spending over every resource in the clock hour.
 * - retry-after: a refused consumer may try again when its window ends (spending counts restart),
 *   or at the pool's next reset when the tokens, not the window, were short.
 *
 * Windows are fixed and aligned on the epoch: an hour for `core` and most resources, a minute for
 * `search` and `code_search` (GitHub's windows for them). No I/O, no timers: time is an argument.
 */
import type { ConsumerRefusal } from './types.js';

export const HOUR_MS = 3_600_000;

/** The length of each rate-limit resource's window on GitHub; unknown resources count by the hour. */
export const RESOURCE_WINDOW_MS: Readonly<Record<string, number>> = Object.freeze({
  core: HOUR_MS,
  search: 60_000,
  code_search: 60_000,
  graphql: HOUR_MS,
  integration_manifest: HOUR_MS,
  dependency_snapshots: HOUR_MS,
  code_scanning_upload: HOUR_MS,
  actions_runner_registration: HOUR_MS,
  source_import: HOUR_MS,
  audit_log: HOUR_MS,
});

export interface Window {
  /** The window's number since the epoch (its Redis keys carry it). */
  readonly id: number;
  /** Epoch ms. */
  readonly endMs: number;
}

/** The window of `resource` that holds `nowMs`. */
export function windowOf(resource: string, nowMs: number): Window {
  const length = Object.hasOwn(RESOURCE_WINDOW_MS, resource) ? RESOURCE_WINDOW_MS[resource]! : HOUR_MS;
  const id = Math.floor(nowMs / length);
  return { id, endMs: (id + 1) * length };
}

/** The clock hour that holds `nowMs` (max_per_hour counts by it). */
export function hourOf(nowMs: number): Window {
  const id = Math.floor(nowMs / HOUR_MS);
  return { id, endMs: (id + 1) * HOUR_MS };
}

/** A weight that is a positive finite number, else 1 (the default). */
export function weightOf(weight: number | undefined): number {
  return weight !== undefined && Number.isFinite(weight) && weight > 0 ? weight : 1;
}

/** weight / (sum of the weights) of `quota`; 0 for a consumer that is not configured. */
export function shareOf(weights: ReadonlyMap<string, number>, consumer: string, quota: number): number {
  const weight = weights.get(consumer);
  if (weight === undefined || quota <= 0) return 0;
  let total = 0;
  for (const each of weights.values()) total += each;
  return total > 0 ? (quota * weight) / total : 0;
}

export function reserveOf(share: number, reserveFraction: number): number {
  return share * Math.min(1, Math.max(0, reserveFraction));
}

/** What every other consumer has not yet spent of its reserve: what `consumer` must leave in the pool. */
export function othersReserves(
  weights: ReadonlyMap<string, number>,
  consumer: string,
  quota: number,
  reserveFraction: number,
  spent: ReadonlyMap<string, number>,
): number {
  let held = 0;
  for (const name of weights.keys()) {
    if (name === consumer) continue;
    const reserve = reserveOf(shareOf(weights, name, quota), reserveFraction);
    held += Math.max(0, reserve - (spent.get(name) ?? 0));
  }
  return held;
}

export interface ShareInput {
  readonly consumer: string;
  /** Every configured consumer's weight. */
  readonly weights: ReadonlyMap<string, number>;
  readonly reserveFraction: number;
  /** The pool's quota for the resource over one window (the sum of its live tokens' limits); 0 while unknown. */
  readonly quota: number;
  /** What the pool's tokens hold for the resource right now. */
  readonly poolRemaining: number;
  /** When the pool's quota for the resource next grows (epoch ms), if known. */
  readonly poolResetMs: number | undefined;
  /** Units each consumer spent (or holds in flight) in this window of the resource, without the one asked for. */
  readonly spent: ReadonlyMap<string, number>;
  /** When this window of the resource ends (epoch ms). */
  readonly windowEndMs: number;
  /** max_per_hour: the cap, what the consumer spent this clock hour, and when the hour ends (epoch ms). */
  readonly hourly?: { readonly cap: number; readonly spent: number; readonly endMs: number } | undefined;
  readonly nowMs: number;
}

export type ShareDecision = { kind: 'admit'; borrowing: boolean } | { kind: 'refuse'; reason: ConsumerRefusal; retryAfterSeconds: number };

function secondsUntil(atMs: number, nowMs: number): number {
  return Math.max(1, Math.ceil((atMs - nowMs) / 1000));
}

/** Whether one more unit of the resource may be spent for `consumer` now (see the module comment). */
export function decide(input: ShareInput): ShareDecision {
  const { consumer, spent, nowMs } = input;
  const own = spent.get(consumer) ?? 0;
  if (input.hourly !== undefined && input.hourly.spent >= input.hourly.cap) {
    return { kind: 'refuse', reason: 'max_per_hour', retryAfterSeconds: secondsUntil(input.hourly.endMs, nowMs) };
  }
  // Numbers not known yet (no token answered): nothing to divide; the pool's own rules apply.
  if (input.quota <= 0) return { kind: 'admit', borrowing: false };
  const held = othersReserves(input.weights, consumer, input.quota, input.reserveFraction, spent);
  // No reserve left to protect: whatever remains is first come, first served (the pool's own 429 applies).
  if (held <= 0) return { kind: 'admit', borrowing: own + 1 > shareOf(input.weights, consumer, input.quota) };
  let spentByAll = 0;
  for (const units of spent.values()) spentByAll += units;
  const windowLeft = input.quota - spentByAll;
  const left = Math.min(windowLeft, input.poolRemaining);
  if (left - 1 >= held) return { kind: 'admit', borrowing: own + 1 > shareOf(input.weights, consumer, input.quota) };
  const tokensShort = input.poolRemaining < windowLeft && input.poolResetMs !== undefined && input.poolResetMs < input.windowEndMs;
  const retryAt = tokensShort ? input.poolResetMs! : input.windowEndMs;
  return { kind: 'refuse', reason: 'share', retryAfterSeconds: secondsUntil(retryAt, nowMs) };
}

/** One consumer's standing in one window of a resource, as /admin/consumers shows it. */
export interface Standing {
  share: number;
  reserve: number;
  spent: number;
  /** What the consumer could spend right now, borrowing included (0 when refused). */
  available: number;
}

export function standingOf(input: ShareInput): Standing {
  const share = shareOf(input.weights, input.consumer, input.quota);
  const spent = input.spent.get(input.consumer) ?? 0;
  const reserve = reserveOf(share, input.reserveFraction);
  if (input.quota <= 0) return { share: 0, reserve: 0, spent, available: 0 };
  const held = othersReserves(input.weights, input.consumer, input.quota, input.reserveFraction, input.spent);
  let spentByAll = 0;
  for (const units of input.spent.values()) spentByAll += units;
  const left = Math.min(input.quota - spentByAll, input.poolRemaining);
  return { share, reserve, spent, available: Math.max(0, Math.floor(left - held)) };
}

/** Whether a pool refusal was about one consumer's share or caps (others may still be served). */
export function isConsumerRefusal(reason: string): reason is ConsumerRefusal {
  return reason === 'share' || reason === 'max_per_hour' || reason === 'max_concurrency' || reason === 'points';
}

/** Requests that carry no consumer wait in one lane of their own, counted as a consumer of this weight. */
export const UNKEYED_QUEUE_WEIGHT = 1;

/**
 * How many of each consumer's requests may wait at once: `pool.max_queue` split by weight. A
 * consumer's bound is max(1, floor(max_queue × weight ÷ total weight)), where the total counts
 * every configured consumer plus the lane of requests without one (consumer ''; a name that is
 * not configured weighs as that lane). One consumer's waiters never take another's room; with a
 * max_queue of 0 nothing waits. Returns the bound of a consumer, computed once per name.
 */
export function queueBounds(maxQueue: number, weights: ReadonlyMap<string, number>): (consumer: string) => number {
  let total = UNKEYED_QUEUE_WEIGHT;
  for (const weight of weights.values()) total += weight;
  const boundOf = (weight: number): number => (maxQueue <= 0 ? 0 : Math.max(1, Math.floor((maxQueue * weight) / total)));
  const unkeyed = boundOf(UNKEYED_QUEUE_WEIGHT);
  const bounds = new Map([...weights].map(([name, weight]) => [name, boundOf(weight)]));
  return (consumer) => bounds.get(consumer) ?? unkeyed;
}
