/**
 * Pure: when an entry read during its freshness lifetime is revalidated ahead of its expiry
 * (`upstreams[].cache.refresh_ahead`, docs/caching.md#refresh-ahead). The refresh falls in the
 * window before the entry expires: a tenth of its lifetime, at least 1 s and at most 30 s, never more
 * than half of it; a jitter spreads it over the window's first half, so entries stored together do
 * not refresh together, and a refresh has the second half (at least 250 ms of a 1 s entry) to come back.
 */
import type { CacheEntry } from './entry.js';

/** The window before expiry: this share of the lifetime, clamped to [MIN, MAX] and to half of it. */
export const REFRESH_WINDOW_SHARE = 0.1;
export const REFRESH_WINDOW_MIN_MS = 1_000;
export const REFRESH_WINDOW_MAX_MS = 30_000;

type Timed = Pick<CacheEntry, 'storedAt' | 'initialAge' | 'lifetime'>;

/** When the entry stops being fresh (ms since epoch): its age (policy.ts `currentAge`) reaches its lifetime. */
export function freshUntil(entry: Timed): number {
  return entry.storedAt + (entry.lifetime - entry.initialAge) * 1000;
}

/** The refresh window of a lifetime (seconds), in ms. */
export function refreshWindowMs(lifetime: number): number {
  const life = lifetime * 1000;
  return Math.min(Math.max(life * REFRESH_WINDOW_SHARE, REFRESH_WINDOW_MIN_MS), REFRESH_WINDOW_MAX_MS, life / 2);
}

/**
 * When to revalidate an entry read at `now`, or undefined when it is not refreshed ahead: no
 * validators (a refresh would be a full answer, never free; `validators: false` for GraphQL
 * answers, which have none and are refreshed in full), not a 200, or no freshness left.
 * `jitter` in [0, 1) places it within the first half of the window; a read already inside the
 * window refreshes at once.
 */
export function refreshAt(
  entry: Timed & Pick<CacheEntry, 'status' | 'etag' | 'lastModified'>,
  now: number,
  jitter: number,
  validators = true,
): number | undefined {
  if (entry.status !== 200 || (validators && entry.etag === undefined && entry.lastModified === undefined)) return undefined;
  if (entry.lifetime <= 0) return undefined;
  const until = freshUntil(entry);
  if (until <= now) return undefined;
  const window = refreshWindowMs(entry.lifetime);
  return Math.max(now, until - window + (jitter * window) / 2);
}
