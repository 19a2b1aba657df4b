/**
 * Pure reading of what the upstream says about the token that fetched an answer: the
 * x-ratelimit-* headers, GET /rate_limit's body, Retry-After, and the verdict of a status
 * (fine, dead, primary limit spent, secondary limit). What the verdict then does to the token's
 * numbers is state.ts's job.
 */
import type { HeaderLookup, RateObservation, Verdict } from './types.js';

function int(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*\d{1,15}\s*$/.test(value)) return undefined;
  return Number(value);
}

/** Reads x-ratelimit-limit/remaining/reset/resource; undefined unless all three numbers are there. */
export function readRateLimit(header: HeaderLookup): RateObservation | undefined {
  const limit = int(header('x-ratelimit-limit'));
  const remaining = int(header('x-ratelimit-remaining'));
  const reset = int(header('x-ratelimit-reset'));
  if (limit === undefined || remaining === undefined || reset === undefined) return undefined;
  return { limit, remaining: Math.min(remaining, limit), reset, resource: (header('x-ratelimit-resource') ?? 'core').trim().toLowerCase() };
}

/** Reads GET /rate_limit's body into the core observation (GitHub's shape: resources.core). */
export function rateLimitFromBody(body: string): RateObservation | undefined {
  try {
    const parsed = JSON.parse(body) as { resources?: { core?: Record<string, unknown> }; rate?: Record<string, unknown> };
    const core = parsed.resources?.core ?? parsed.rate;
    if (core === undefined) return undefined;
    const { limit, remaining, reset } = core;
    if (typeof limit !== 'number' || typeof remaining !== 'number' || typeof reset !== 'number') return undefined;
    return { limit, remaining: Math.min(remaining, limit), reset, resource: 'core' };
  } catch {
    return undefined;
  }
}

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
export function classify(status: number, header: HeaderLookup, body: string | undefined, nowMs: number): Verdict {
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
export function retryable(verdict: Verdict): boolean {
  return verdict.kind !== 'ok';
}
