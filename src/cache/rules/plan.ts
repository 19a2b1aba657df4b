/**
 * Pure: what to do with what the tiers hold for a request, before any upstream exchange
 * (RFC 9111 section 4 and 5.2.1): serve it fresh, serve it stale (and maybe revalidate in the
 * background), go upstream (conditionally when there is a stored entry), or answer 504 because
 * the client asked for only-if-cached.
 */
import type { Directives } from '../../http/headers/cache-control.js';
import type { CacheEntry } from './entry.js';
import { decide } from './policy.js';

export type Plan =
  | { kind: 'fresh'; entry: CacheEntry; age: number; ttl: number }
  /** max-stale, or stale-while-revalidate (`background`: revalidate after answering). */
  | { kind: 'stale'; entry: CacheEntry; age: number; ttl: number; background: boolean }
  /** `stale`: the entry to revalidate (and to fall back on); `forced`: the client asked for it. */
  | { kind: 'fetch'; stale: CacheEntry | undefined; forced: boolean }
  | { kind: 'only-if-cached' };

const FETCH_NEW: Plan = { kind: 'fetch', stale: undefined, forced: false };
const ONLY_IF_CACHED: Plan = { kind: 'only-if-cached' };

/** `entry`: the stored entry usable for this request (Vary matched, not invalidated), if any. */
export function planFor(entry: CacheEntry | undefined, directives: Readonly<Directives>, now: number): Plan {
  if (entry === undefined) return directives.onlyIfCached ? ONLY_IF_CACHED : FETCH_NEW;
  const decision = decide(entry, directives, now);
  if (decision.kind === 'fresh') return { kind: 'fresh', entry, age: decision.age, ttl: decision.ttl };
  if (decision.kind === 'stale') return { kind: 'stale', entry, age: decision.age, ttl: decision.ttl, background: decision.background };
  if (directives.onlyIfCached) return ONLY_IF_CACHED;
  return { kind: 'fetch', stale: entry, forced: decision.forced };
}
