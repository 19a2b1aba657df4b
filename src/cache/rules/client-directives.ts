/**
 * Pure: which request Cache-Control directives a caching upstream acts on.
 *
 * Node's `fetch` (undici, so Octokit) follows the fetch standard's cache mode: a request that
 * carries a validator (`If-None-Match`, `If-Modified-Since`, ...) gets `Cache-Control: no-cache`
 * and `Pragma: no-cache` added, whatever the caller wanted. Honoured, they send every poll of
 * GitHub's recommended conditional-request pattern upstream. `cache.client_no_cache` decides:
 *
 * - `conditional` drops `no-cache` (from either header) only on a conditional request (one with
 *   `If-None-Match` or `If-Modified-Since`): the polls fetch made so. Without a validator the client
 *   sent `no-cache` itself (curl, a script) and means it: honoured.
 * - `ignore` drops every `no-cache`; `honor` keeps every one.
 *
 * Nothing else is ever dropped:
 * - `no-store` stays: it asks the proxy not to keep the answer, which never costs an upstream
 *   request and which a client sends only on purpose (fetch never adds it as a header).
 * - `only-if-cached` stays: it can only spare the upstream (a 504 when nothing is stored).
 * - `max-age=0`, `min-fresh`, `max-stale` stay: fetch never adds them, so a client that sends one
 *   means it (curl, a browser's reload).
 *
 * Unset, the mode follows the policy: `conditional` under the GitHub policies (`max-age`,
 * `revalidate`, `ttl`), `honor` under `rfc9111`, which stays a standards-conforming shared cache
 * unless the operator configures otherwise. A dropped `no-cache` shows in Cache-Status
 * (`detail=client-no-cache-ignored`).
 */
import type { Directives } from '../../http/headers/fields.js';
import type { PolicyKind } from './policy.js';

export type ClientNoCache = 'honor' | 'ignore' | 'conditional';

/** The Cache-Status detail of a request whose `no-cache` the cache did not act on. */
export const NO_CACHE_IGNORED = 'client-no-cache-ignored';

/** The mode in force for an upstream: the configured one, else the policy's default. */
export function clientNoCacheMode(policy: PolicyKind, configured: ClientNoCache | undefined): ClientNoCache {
  if (configured !== undefined) return configured;
  return policy === 'rfc9111' ? 'honor' : 'conditional';
}

/**
 * The directives the cache acts on: `no-cache` removed under `ignore`, or under `conditional` when
 * the request carries `If-None-Match` or `If-Modified-Since`; everything else kept. The very
 * `directives` object comes back when nothing was removed (so `!==` tells that one was).
 */
export function clientDirectives(directives: Readonly<Directives>, mode: ClientNoCache, conditional: boolean): Readonly<Directives> {
  if (mode === 'honor' || directives.noCache !== true || (mode === 'conditional' && !conditional)) return directives;
  const kept: Directives = { ...directives };
  delete kept.noCache;
  return kept;
}
