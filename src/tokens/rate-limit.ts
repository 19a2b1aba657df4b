/**
 * Pure rate-limit rules: what an upstream response says about the token that fetched it, how
 * that updates the token's state, how long a secondary limit pauses it, and the pool-wide
 * x-ratelimit-* headers consumers see.
 */
import { RESET_GRACE_MS, quotaLeft, windowOver, type TokenState } from './choose.js';

export interface RateObservation {
  limit: number;
  remaining: number;
  /** Epoch seconds. */
  reset: number;
  resource: string;
}

type Header = (name: string) => string | undefined;

function int(v: string | undefined): number | undefined {
  if (v === undefined || !/^\s*\d{1,15}\s*$/.test(v)) return undefined;
  return Number(v);
}

/** Reads x-ratelimit-limit/remaining/reset/resource; undefined unless all three numbers are there. */
export function readRateLimit(header: Header): RateObservation | undefined {
  const limit = int(header('x-ratelimit-limit'));
  const remaining = int(header('x-ratelimit-remaining'));
  const reset = int(header('x-ratelimit-reset'));
  if (limit === undefined || remaining === undefined || reset === undefined) return undefined;
  return { limit, remaining: Math.min(remaining, limit), reset, resource: (header('x-ratelimit-resource') ?? 'core').trim().toLowerCase() };
}

/** What an upstream answer means for the token that was used. */
export type Verdict =
  | { kind: 'ok' }
  /** 401: the token is bad or revoked. */
  | { kind: 'dead' }
  /** 403/429 with remaining 0: spent until `reset` (epoch seconds, when given). */
  | { kind: 'exhausted'; reset: number | undefined }
  /** 403/429 secondary limit: pause for `retryAfterMs` when given, else the doubling default. */
  | { kind: 'secondary'; retryAfterMs: number | undefined };

const SECONDARY = /secondary rate limit/i;

/** Parses Retry-After (delta seconds or an HTTP date) into ms from `now`. */
export function retryAfterMs(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const secs = int(value);
  if (secs !== undefined) return secs * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/**
 * Classifies an upstream answer for the token that fetched it. `body` is the response text when
 * it was read (needed only for a secondary limit announced in the message alone).
 */
export function classify(status: number, header: Header, body: string | undefined, nowMs: number): Verdict {
  if (status === 401) return { kind: 'dead' };
  if (status !== 403 && status !== 429) return { kind: 'ok' };
  const retry = retryAfterMs(header('retry-after'), nowMs);
  const remaining = int(header('x-ratelimit-remaining'));
  if (body !== undefined && SECONDARY.test(body)) return { kind: 'secondary', retryAfterMs: retry };
  if (remaining === 0) return { kind: 'exhausted', reset: int(header('x-ratelimit-reset')) };
  if (retry !== undefined) return { kind: 'secondary', retryAfterMs: retry };
  // A 429 without any clue is a rate limit of some kind: back off as for a secondary limit.
  if (status === 429) return { kind: 'secondary', retryAfterMs: undefined };
  return { kind: 'ok' }; // a plain 403 (forbidden resource) says nothing about the token
}

/** Whether a request that got this verdict should be tried again on another token. */
export function retryable(v: Verdict): boolean {
  return v.kind !== 'ok';
}

/**
 * Merges an observation into a token's numbers. Responses can arrive out of order, so within one
 * window the lowest remaining wins; an observation with a later reset starts a new window, and
 * one with an earlier reset is a late answer from an old window and is ignored. Only the `core`
 * resource is tracked (search and GraphQL have windows of their own).
 */
export function mergeObservation(
  t: Pick<TokenState, 'limit' | 'remaining' | 'reset'>,
  o: RateObservation,
  known: boolean,
): { limit: number; remaining: number; reset: number } {
  if (o.resource !== 'core') return { limit: t.limit, remaining: t.remaining, reset: t.reset };
  if (!known || o.reset > t.reset) return { limit: o.limit, remaining: o.remaining, reset: o.reset };
  if (o.reset < t.reset) return { limit: t.limit, remaining: t.remaining, reset: t.reset };
  return { limit: o.limit, remaining: Math.min(t.remaining, o.remaining), reset: t.reset };
}

export const SECONDARY_BASE_MS = 60_000;
export const SECONDARY_MAX_MS = 60 * 60_000;

/** Pause after a secondary limit: the upstream's Retry-After, else 60 s doubling per repeat (capped at 1 h). */
export function secondaryPauseMs(retryAfter: number | undefined, repeats: number): number {
  if (retryAfter !== undefined) return Math.min(Math.max(retryAfter, 1000), SECONDARY_MAX_MS);
  return Math.min(SECONDARY_BASE_MS * 2 ** Math.max(0, repeats - 1), SECONDARY_MAX_MS);
}

/** Window in which secondary limits on several tokens slow the whole upstream down. */
export const SLOWDOWN_WINDOW_MS = 60_000;

/**
 * Whole-upstream concurrency cap after recent secondary limits: the configured cap, or a quarter
 * of it (at least 1) while two or more distinct tokens hit a secondary limit within the last minute.
 */
export function upstreamConcurrency(max: number, hits: ReadonlyArray<{ at: number; token: string }>, nowMs: number): number {
  const recent = new Set<string>();
  for (const h of hits) if (nowMs - h.at < SLOWDOWN_WINDOW_MS) recent.add(h.token);
  return recent.size >= 2 ? Math.max(1, Math.floor(max / 4)) : max;
}

export interface PoolRateLimit {
  limit: number;
  remaining: number;
  used: number;
  /** Epoch seconds: the earliest reset among live tokens. */
  reset: number;
}

/**
 * The pool as one quota, as consumers see it in x-ratelimit-*: the sums of limits and remaining
 * over live tokens (limit = remaining + used), and the earliest reset. Paused tokens count with
 * their quota (it comes back); dead ones not at all.
 */
export function poolRateLimit(tokens: readonly TokenState[], nowMs: number): PoolRateLimit {
  let limit = 0;
  let remaining = 0;
  let reset = Number.POSITIVE_INFINITY;
  for (const t of tokens) {
    if (t.dead) continue;
    limit += t.limit;
    remaining += Math.max(0, quotaLeft(t, nowMs));
    const r = windowOver(t, nowMs) ? Math.ceil((nowMs + RESET_GRACE_MS) / 1000) : t.reset;
    if (r < reset) reset = r;
  }
  if (!Number.isFinite(reset)) reset = Math.ceil(nowMs / 1000);
  remaining = Math.min(remaining, limit);
  return { limit, remaining, used: limit - remaining, reset };
}

export type TokenHealth = 'ok' | 'exhausted' | 'paused' | 'dead';

export function healthOf(t: TokenState, nowMs: number): TokenHealth {
  if (t.dead) return 'dead';
  if (t.pausedUntil > nowMs) return 'paused';
  return quotaLeft(t, nowMs) <= 0 ? 'exhausted' : 'ok';
}
