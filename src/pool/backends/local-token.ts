/**
 * One token as the in-process pool keeps it: one window per rate-limit resource (rate-limit.ts),
 * and what belongs to the credential as a whole (its pause, its death, its concurrency), plus what
 * only this process knows (leases in flight, secondary limits in a row, the last error).
 *
 * `view` shows the token as state.ts and choose.ts see it in one resource; `write` stores their
 * result back. A window is only created once the resource is used or learnt, so a token that never
 * searched has no search window (and reports none). Its pacing under the secondary limits is at
 * the end (`LocalPacing`).
 */
import { quotaLeft, UNSEEN, windowOver } from '../rules/state.js';
import { allowanceLeft, resourceReport, reportOf } from '../rules/report.js';
import { RESOURCES, type Resource } from '../rules/rate-limit.js';
import { scopesRow, UNSEEN_SCOPES, type MemberScopes } from '../rules/scopes.js';
import {
  type PaceEntry,
  BURST_WINDOW_MS,
  burstBudget,
  LOG_SPAN_MS,
  paceReadyAt,
  pointsOf,
  pruneLog,
  chargeOf,
  spentWithin,
} from '../rules/choose.js';
import type { PoolToken, ResourceReport, TokenNumbers, TokenReport, TokenState, AcquireOptions, PaceKind } from '../rules/types.js';
import { leavesOwed } from '../rules/points-share.js';
import type { ConsumerPace } from './consumer-pace.js';

/** One resource's window of a token, with what this process keeps beside it. */
export interface Window {
  limit: number;
  remaining: number;
  /** Epoch seconds. */
  reset: number;
  known: boolean;
  /** Requests in flight on the token in this resource (each reserves one unit of it). */
  inFlight: number;
  /** Units this replica may still spend on its own (shared budget unreachable), or undefined. */
  allowance: number | undefined;
}

export interface Token {
  readonly name: string;
  /** The credential (never reported): it changes when the member is updated (membership.ts). */
  value: string;
  /** The Authorization header value of `value`. */
  authorization: string;
  /** A confirmed 401 (every resource). */
  dead: boolean;
  /** No rate limit applies (every resource: state.ts, unlimited). */
  unlimited: boolean;
  /** Secondary limit (every resource: it is the credential's), epoch ms. */
  pausedUntil: number;
  /** Requests in flight over every resource (the per-token concurrency cap). */
  inFlight: number;
  readonly windows: Map<Resource, Window>;
  secondaryRepeats: number;
  lastError: string | null;
  lastErrorAt: number | null;
  /** What its answers said of its OAuth scopes (scopes.ts): the credential's, so a new value is unseen again. */
  scopes: MemberScopes;
  /** What this process sent on it lately, per points budget (choose.ts: the sliding log), oldest first. */
  readonly pace: Map<PaceKind, PaceEntry[]>;
  /** Not before this time (epoch ms) in a points budget: the shared budget said other replicas spent it. */
  readonly paceHold: Map<PaceKind, number>;
}

export function newToken(configured: PoolToken): Token {
  return {
    name: configured.name,
    value: configured.value,
    authorization: `token ${configured.value}`,
    dead: false,
    unlimited: false,
    pausedUntil: 0,
    inFlight: 0,
    windows: new Map(),
    secondaryRepeats: 0,
    lastError: null,
    lastErrorAt: null,
    scopes: UNSEEN_SCOPES,
    pace: new Map(),
    paceHold: new Map(),
  };
}

/**
 * The member sends a new credential from its next lease on (leases in flight keep the old one):
 * its windows, pause and secondary limits stay (they are the name's budget), but a death and the
 * scopes were the old credential's: it is alive again until the new one is refused, its scopes unseen.
 */
export function revalue(token: Token, value: string): void {
  token.value = value;
  token.authorization = `token ${value}`;
  token.dead = false;
  token.scopes = UNSEEN_SCOPES;
}

/** The token's window of a resource, created (as an unseen one) on first use. */
export function windowOf(token: Token, resource: Resource): Window {
  let window = token.windows.get(resource);
  if (window === undefined) {
    window = { limit: UNSEEN.limit, remaining: UNSEEN.remaining, reset: UNSEEN.reset, known: false, inFlight: 0, allowance: undefined };
    token.windows.set(resource, window);
  }
  return window;
}

/** The token as seen in one resource: that window's numbers and reservations, the token's pause, death and concurrency. */
export function view(token: Token, resource: Resource): TokenState & TokenNumbers {
  const window = token.windows.get(resource);
  return {
    name: token.name,
    limit: window?.limit ?? UNSEEN.limit,
    remaining: window?.remaining ?? UNSEEN.remaining,
    reset: window?.reset ?? UNSEEN.reset,
    known: window?.known ?? false,
    inFlight: window?.inFlight ?? 0,
    concurrent: token.inFlight,
    dead: token.dead,
    pausedUntil: token.pausedUntil,
    unlimited: token.unlimited,
  };
}

/**
 * The token as it may be spent from here in one resource: `view`, with `remaining` no more than the
 * window's local allowance while there is one (shared budget unreachable). Token choice and the
 * pool's quota use it; settling and reports use `view`, so an allowance is never taken for spent quota.
 */
export function usable(token: Token, resource: Resource): TokenState & TokenNumbers {
  const seen = view(token, resource);
  const allowance = token.windows.get(resource)?.allowance;
  return allowance === undefined ? seen : { ...seen, remaining: Math.min(seen.remaining, allowance) };
}

/** Stores numbers (of the token as seen in `resource`) back: the window's, and the token's pause, death and want of limits. */
export function write(token: Token, resource: Resource, numbers: TokenNumbers): void {
  const window = windowOf(token, resource);
  window.limit = numbers.limit;
  window.remaining = numbers.remaining;
  window.reset = numbers.reset;
  window.known = numbers.known;
  token.pausedUntil = numbers.pausedUntil;
  token.dead = numbers.dead;
  token.unlimited = numbers.unlimited;
}

/** Whether the token knows its numbers in a resource. */
export function knows(token: Token, resource: Resource): boolean {
  return token.windows.get(resource)?.known === true;
}

/** The token's /admin/tokens row: core's numbers, its whole concurrency, and every known resource (none when unlimited). */
export function tokenReport(token: Token, nowMs: number): TokenReport {
  const resources: Partial<Record<Resource, ResourceReport>> = {};
  for (const resource of token.unlimited ? [] : RESOURCES) {
    const window = token.windows.get(resource);
    if (window?.known === true) resources[resource] = resourceReport(window, nowMs);
  }
  const core = view(token, 'core');
  const coreWindow = token.windows.get('core');
  const allowance = coreWindow === undefined ? null : allowanceLeft(coreWindow, nowMs);
  const reported = { ...core, inFlight: token.inFlight, lastError: token.lastError, lastErrorAt: token.lastErrorAt };
  const report = reportOf(reported, nowMs, resources, allowance);
  const { scopes, scopes_from } = scopesRow(token.name, token.scopes);
  return { ...report, scopes, scopes_from };
}

/**
 * Lets this replica spend only `share` of every known window's quota on its own (Redis outage: 1/N
 * each): an allowance beside the window, which keeps the upstream's numbers as they are.
 */
export function scaleWindows(token: Token, share: number, nowMs: number, fallbackReset: number): void {
  for (const window of token.windows.values()) {
    if (!window.known) continue;
    // What is left now, minus what is already in flight here, split: then spent one by one.
    const left = quotaLeft(window, nowMs);
    window.allowance = Math.max(0, Math.floor((left - window.inFlight) * share) + window.inFlight);
    if (windowOver(window, nowMs)) {
      window.remaining = left; // the window renewed unseen: its whole limit, until an unknown reset assumed soon
      window.reset = fallbackReset;
    }
  }
}

/** Ends the token's local allowances (the shared budget answers again). */
export function endAllowances(token: Token): void {
  for (const window of token.windows.values()) window.allowance = undefined;
}

/*
 * The in-process pool's side of pacing (choose.ts has the rule): each token's log of what this
 * process sent per points budget, how it makes a token wait (a token short of points looks paused
 * until they are back, so choice, waiting and Retry-After work as for a secondary-limit pause),
 * the hold the shared budget puts on a token whose points other replicas spent, and, with consumer
 * keys, the points a consumer leaves to the others (points-share.ts).
 */
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
