/**
 * Pure: negative entries. Under the GitHub policies (`max-age`, `revalidate`, `ttl`) a 404 or 410
 * answer to a GET is stored in its credential partition for `upstreams[].cache.negative_seconds`
 * (0: never): every authenticated 404 costs a unit of quota, and clients poll for things that do
 * not exist yet. It is never served stale (no stale-if-error, no stale-while-revalidate, no
 * max-stale) and never refreshed ahead. Under `rfc9111` the RFC's rules decide, as for any status.
 *
 * A negative entry is filed (src/cache/store/tags.ts) under the repository and owner of its path,
 * so that a webhook delivery that could create it purges it (webhook-tags.ts); a 200 for its key
 * replaces it.
 */
import type { CacheEntry } from './entry.js';
import type { FreshnessPolicy } from './policy.js';
import { ownerTag, repoTag } from './tags.js';

export function isNegativeStatus(status: number): boolean {
  return status === 404 || status === 410;
}

/** How long a negative answer is fresh, seconds; undefined when it is not stored as one. */
export function negativeLifetime(policy: FreshnessPolicy, status: number, method: 'GET' | 'HEAD'): number | undefined {
  if (!isNegativeStatus(status) || method !== 'GET') return undefined;
  if (policy.kind === 'rfc9111' || policy.kind === 'none') return undefined;
  const seconds = policy.negativeSeconds ?? 0;
  return seconds > 0 ? seconds : undefined;
}

/** The entry as a negative one: fresh for `seconds`, never served stale. */
export function asNegative(entry: CacheEntry, seconds: number): CacheEntry {
  return { ...entry, lifetime: seconds, staleIfError: 0, staleWhileRevalidate: 0, mustRevalidate: true };
}

/**
 * The tags of an API path's negative entry: `/repos/<owner>/<name>/...` is the repository and its
 * owner; `/users/<login>...`, `/orgs/<login>...` the account. Other paths have none (they expire).
 */
export function pathTags(apiPath: string): string[] {
  const [, first, owner, name] = apiPath.split('/', 4);
  const tags: Array<string | undefined> = [];
  const decoded = (text: string | undefined): string | undefined => {
    if (text === undefined) return undefined;
    try {
      return decodeURIComponent(text);
    } catch {
      return undefined;
    }
  };
  if (first === 'repos') tags.push(repoTag(decoded(owner), decoded(name)), ownerTag(decoded(owner)));
  else if (first === 'users' || first === 'orgs') tags.push(ownerTag(decoded(owner)));
  return tags.filter((tag): tag is string => tag !== undefined);
}
