/**
 * What counts as "quota saved": a client request answered without spending upstream quota.
 * Feeds `etagere_quota_saved_total` and the status page's "saved" count. Pure.
 *
 * - `hit`, `stale`, `coalesced`: answered from the cache or from another request's exchange, so
 *   no request of its own went upstream.
 * - `revalidated`: a conditional request went upstream and came back 304. GitHub does not count
 *   a 304 against the rate limit when the request was authorised, so it saves quota only then.
 * - `miss`, `bypass`, `error`, or no cache outcome at all: quota was spent (or nothing was
 *   answered from the cache).
 */
/** What a request's answer was, as metrics and logs count it (Cache-Status names it: http/headers/fields.ts). */
export type CacheOutcome = 'hit' | 'revalidated' | 'miss' | 'stale' | 'coalesced' | 'bypass' | 'error';

const FREE_OUTCOMES: ReadonlySet<string> = new Set<CacheOutcome>(['hit', 'stale', 'coalesced']);

/**
 * Whether a request with this cache outcome (a `CacheOutcome`, or undefined when the request had
 * none) spent no upstream quota. `authorized`: the upstream exchange, if any, carried a
 * credential (the client's own or a pool token).
 */
export function savedQuota(outcome: string | undefined, authorized: boolean): boolean {
  if (outcome === undefined) return false;
  return FREE_OUTCOMES.has(outcome) || (outcome === 'revalidated' && authorized);
}

/** What a request cost upstream: nothing of its own, a free request, or a billable one. */
export type Spend = 'none' | 'free' | 'billable';

/**
 * What an answered request cost upstream, from what it served: it went upstream when an upstream
 * status came back for it (a coalesced answer's status is another request's); that request was
 * free when it was a 304 to an authorised request, billable otherwise. Feeds the per-consumer
 * upstream counter and /admin/quota.
 */
export function upstreamSpend(outcome: string | undefined, upstreamStatus: number | undefined, authorized: boolean): Spend {
  if (upstreamStatus === undefined || outcome === 'coalesced') return 'none';
  return upstreamStatus === 304 && authorized ? 'free' : 'billable';
}
