/**
 * Pure: what a GraphQL answer says about the token that fetched it (whether it may be cached is
 * src/cache/rules/graphql-tags.ts's `storableData`).
 *
 * GitHub announces GraphQL rate limits in the body: a primary limit is a 200 whose `errors` hold
 * `{"type": "RATE_LIMITED", "message": "API rate limit exceeded for user ID ..."}` with
 * `x-ratelimit-remaining: 0`, a secondary limit a 403 or a 200 with the same type and a message
 * about a secondary rate limit. The 403 is REST's and the pool reads it as such. A 200
 * RATE_LIMITED counts as a 429 with that body (`tokenStatus`), so the pool's own rules
 * (src/pool/rules/rate-limit.ts) apply unchanged: "secondary rate limit" pauses the token, remaining 0
 * spends its `graphql` window, and the call is tried on another token. One exception: a
 * RATE_LIMITED while the token still has points (the call cost more than it had left) says
 * nothing against the token, and goes to the client as it is. `RATE_LIMIT` (seen from GitHub too)
 * counts the same.
 */
import type { HeaderLookup } from './types.js';

const LIMIT_TYPES: ReadonlySet<string> = new Set(['RATE_LIMITED', 'RATE_LIMIT']);

/** Answers larger than this are never rate-limit errors (those are a few hundred bytes). */
const ERROR_BODY_MAX = 16 * 1024;

const SECONDARY = /secondary rate limit/i;

function parsed(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}

function errorsOf(value: unknown): unknown[] | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const errors = (value as { errors?: unknown }).errors;
  return Array.isArray(errors) ? errors : undefined;
}

/** The RATE_LIMITED errors of a body (none when it has none, or is not JSON). */
function limitErrors(body: Buffer): Array<{ message?: unknown }> {
  if (body.length > ERROR_BODY_MAX || !body.includes('RATE_LIMIT')) return [];
  return (errorsOf(parsed(body)) ?? []).filter(
    (error): error is { message?: unknown } =>
      error !== null && typeof error === 'object' && LIMIT_TYPES.has(String((error as { type?: unknown }).type)),
  );
}

/** Whether a body holds a RATE_LIMITED error. */
export function isRateLimited(body: Buffer): boolean {
  return limitErrors(body).length > 0;
}

/**
 * The status an answer counts as for its token: a 200 RATE_LIMITED is a 429 when it is a
 * secondary limit or the token's points are spent (or unknown); anything else keeps its status.
 */
export function tokenStatus(status: number, body: Buffer, header: HeaderLookup): number {
  if (status !== 200) return status;
  const limits = limitErrors(body);
  if (limits.length === 0) return status;
  if (limits.some((error) => SECONDARY.test(String(error.message)))) return 429;
  const remaining = header('x-ratelimit-remaining')?.trim();
  return remaining === undefined || remaining === '0' ? 429 : status;
}
