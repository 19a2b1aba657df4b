/**
 * Pure: which request Cache-Control directives a caching upstream acts on.
 *
 * Node's `fetch` (undici, so Octokit) follows the fetch standard's cache mode: a request that
 * carries a validator (`If-None-Match`, `If-Modified-Since`, ...) gets `Cache-Control: no-cache`
 * and `Pragma: no-cache` added, whatever the caller wanted. Honoured, they send every poll of
 * GitHub's recommended conditional-request pattern upstream. `cache.client_no_cache: ignore`
 * drops `no-cache` (from either header) and nothing else:
 *
 * - `no-store` stays: it asks the proxy not to keep the answer, which never costs an upstream
 *   request and which a client sends only on purpose (fetch never adds it as a header).
 * - `only-if-cached` stays: it can only spare the upstream (a 504 when nothing is stored).
 * - `max-age=0`, `min-fresh`, `max-stale` stay: fetch never adds them, so a client that sends one
 *   means it (curl, a browser's reload).
 *
 * Unset, the mode follows the policy: `ignore` under the GitHub policies (`max-age`, `revalidate`,
 * `ttl`), `honor` under `rfc9111`, which stays a standards-conforming shared cache unless the
 * operator configures otherwise.
 */
import type { Directives } from './cache-control.js';
import type { PolicyKind } from './policy.js';

export type ClientNoCache = 'honor' | 'ignore';

/** The mode in force for an upstream: the configured one, else the policy's default. */
export function clientNoCacheMode(policy: PolicyKind, configured: ClientNoCache | undefined): ClientNoCache {
  if (configured !== undefined) return configured;
  return policy === 'rfc9111' ? 'honor' : 'ignore';
}

/** The directives the cache acts on: `no-cache` removed under `ignore`, everything else kept. */
export function clientDirectives(directives: Readonly<Directives>, mode: ClientNoCache): Readonly<Directives> {
  if (mode === 'honor' || directives.noCache !== true) return directives;
  const kept: Directives = { ...directives };
  delete kept.noCache;
  return kept;
}
