/**
 * The in-process pool's side of pacing (points.ts has the rule): each token's log of what this
 * process sent per points budget, how it makes a token wait (a token short of points looks paused
 * until they are back, so choice, waiting and Retry-After work as for a secondary-limit pause),
 * the hold the shared budget puts on a token whose points other replicas spent, and, with consumer
 * keys, the points a consumer leaves to the others (points-share.ts).
 */
import {
  BURST_WINDOW_MS,
  burstBudget,
  LOG_SPAN_MS,
  paceReadyAt,
  pointsOf,
  pruneLog,
  chargeOf,
  spentWithin,
  type PaceKind,
} from '../rules/points.js';
import { leavesOwed } from '../rules/points-share.js';
import type { Resource } from '../rules/resource.js';
import type { AcquireOptions, TokenState } from '../rules/types.js';
import type { ConsumerPace } from './consumer-pace.js';
import type { Token } from './local-token.js';

/** Points budgets per minute of every token; absent: no pacing. */
export interface PaceBudgets {
  readonly rest: number;
  readonly graphql: number;
}

/** GraphQL calls spend the GraphQL budget; every other resource is REST's. */
export function paceKindOf(resource: Resource): PaceKind {
  return resource === 'graphql' ? 'graphql' : 'rest';
}

/** This process's budget of a kind: the whole, or its share while the shared budget is out of reach. */
export function budgetOf(budgets: PaceBudgets | undefined, kind: PaceKind, share: number): number | undefined {
  if (budgets === undefined) return undefined;
  return Math.max(1, Math.floor(budgets[kind] * share));
}

/** The points a request costs (AcquireOptions.points, else a read's). */
export function pointsOfRequest(opts: AcquireOptions): number {
  return opts.points !== undefined && Number.isFinite(opts.points) && opts.points > 0 ? opts.points : pointsOf('GET');
}

/** When the token may send `points` more in `kind` (epoch ms, `at` when now). */
export function readyAt(token: Token, kind: PaceKind, budget: number, points: number, at: number, background: boolean): number {
  const log = token.pace.get(kind) ?? [];
  return Math.max(paceReadyAt(log, points, budget, at, background), token.paceHold.get(kind) ?? 0);
}

/** The token as choice sees it: paused until its points are back, when they are short now. */
export function paced(state: TokenState, ready: number, at: number): TokenState {
  return ready > at && ready > state.pausedUntil ? { ...state, pausedUntil: ready } : state;
}

/** Records a request sent on the token for `consumer` (its charge under `budget`). */
export function spend(token: Token, kind: PaceKind, points: number, budget: number, at: number, consumer: string | undefined): number {
  const charge = chargeOf(points, budget);
  const log = pruneLog(token.pace.get(kind) ?? [], at);
  log.push(consumer === undefined ? { at, points: charge } : { at, points: charge, consumer });
  token.pace.set(kind, log);
  return charge;
}

/** A lease spent nothing after all (the shared budget refused it): its entry, the latest, leaves the log (and its consumer's count). */
export function refund(token: Token, kind: PaceKind, consumers: ConsumerPace | undefined): void {
  const entry = token.pace.get(kind)?.pop();
  if (entry !== undefined) consumers?.spend(entry.consumer, kind, -entry.points, entry.at);
}

/** The shared budget refused the token's points until `until`: it waits here too. */
export function holdPace(token: Token, kind: PaceKind, until: number): void {
  token.paceHold.set(kind, Math.max(token.paceHold.get(kind) ?? 0, until));
}

/**
 * When points are what holds the request (every live token not excluded is short of them): the
 * earliest time one gets them back. Undefined when a token has points (or none is live).
 */
export function pacedUntil(
  tokens: readonly Token[],
  opts: AcquireOptions,
  budget: number | undefined,
  kind: PaceKind,
  at: number,
): number | undefined {
  if (budget === undefined) return undefined;
  let earliest: number | undefined;
  for (const token of tokens) {
    if (token.dead || opts.exclude?.has(token.name) === true) continue;
    const ready = readyAt(token, kind, budget, pointsOfRequest(opts), at, opts.background === true);
    if (ready <= at) return undefined;
    if (earliest === undefined || ready < earliest) earliest = ready;
  }
  return earliest;
}

/**
 * With consumer keys: undefined when `opts`' consumer may spend its points now, else when to look
 * again (epoch ms): after it, the pool's points left in the minute or in the 10 s window would not
 * cover what the other active consumers are owed (points-share.ts).
 */
export function heldUntil(
  tokens: readonly Token[],
  consumers: ConsumerPace,
  opts: AcquireOptions,
  budget: number | undefined,
  kind: PaceKind,
  at: number,
): number | undefined {
  if (opts.consumer === undefined || budget === undefined) return undefined;
  const charge = chargeOf(pointsOfRequest(opts), budget);
  const minute = windowHeld(tokens, consumers, opts.consumer, kind, { windowMs: LOG_SPAN_MS, limit: budget, charge }, at);
  const burst = windowHeld(tokens, consumers, opts.consumer, kind, { windowMs: BURST_WINDOW_MS, limit: burstBudget(budget), charge }, at);
  if (minute === undefined) return burst;
  return burst === undefined ? minute : Math.max(minute, burst);
}

/** One window of `heldUntil`: undefined when the points left cover what the others are owed, else when some come back. */
function windowHeld(
  tokens: readonly Token[],
  consumers: ConsumerPace,
  consumer: string,
  kind: PaceKind,
  window: { windowMs: number; limit: number; charge: number },
  at: number,
): number | undefined {
  let live = 0;
  for (const token of tokens) if (!token.dead) live++;
  const held = consumers.held(consumer, kind, window.windowMs, window.limit * live, at);
  if (held <= 0) return undefined;
  let free = 0;
  let frees: number | undefined;
  for (const token of tokens) {
    if (token.dead) continue;
    const seen = spentWithin(token.pace.get(kind) ?? [], at, window.windowMs);
    free += Math.max(0, window.limit - seen.spent);
    if (seen.frees !== undefined && (frees === undefined || seen.frees < frees)) frees = seen.frees;
  }
  if (leavesOwed(free, window.charge, held)) return undefined;
  // Nothing spent in the window: what the others are owed shrinks only as their asks age; look again in a second.
  return frees ?? at + 1000;
}
