/**
 * One token as the in-process pool keeps it: one window per rate-limit resource (resource.ts),
 * and what belongs to the credential as a whole (its pause, its death, its concurrency), plus what
 * only this process knows (leases in flight, secondary limits in a row, the last error).
 *
 * `view` shows the token as state.ts and choose.ts see it in one resource; `write` stores their
 * result back. A window is only created once the resource is used or learnt, so a token that never
 * searched has no search window (and reports none).
 */
import { quotaLeft, UNSEEN, windowOver } from '../rules/state.js';
import { allowanceLeft, resourceReport, reportOf } from '../rules/report.js';
import { RESOURCES, type Resource } from '../rules/resource.js';
import { scopesRow, UNSEEN_SCOPES, type MemberScopes } from '../rules/scopes.js';
import type { PaceEntry, PaceKind } from '../rules/points.js';
import type { PoolToken, ResourceReport, TokenNumbers, TokenReport, TokenState } from '../rules/types.js';

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
  /** What this process sent on it lately, per points budget (points.ts: the sliding log), oldest first. */
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
