/** Per-upstream runtime: its config, client, route templates, addresses, entry forms and freshness policy, built once. */
import type { UpstreamConfig } from '../platform/config/schema.js';
import type { UpstreamPolicy } from '../cache/rules/policy.js';
import { createRouteMatcher, type RouteMatcher, ENTERPRISE_REST_BASE, servesEnterpriseForms } from '../http/route.js';
import { createUpstreamClient, type UpstreamClient } from '../upstream/fetch.js';
import type { RetryObserver } from '../upstream/retries.js';
import { PublicAddresses, type LinkSettings } from '../http/representation.js';
import { EntryForms, type RewrittenForms } from '../cache/store/entry-form.js';
import { upstreamPolicy } from '../cache/rules/stale-marks.js';
import { sharesEquivalentAccept } from '../cache/rules/key.js';
import { NO_TRACING, type Tracing } from '../platform/trace/tracing.js';

export interface UpstreamRuntime {
  readonly cfg: UpstreamConfig;
  readonly client: UpstreamClient;
  /** Its freshness policy: the kind, and the policy for one client path (src/cache/rules/policy.ts `UpstreamPolicy`). */
  readonly policy: UpstreamPolicy;
  /** Route templates for metric labels. */
  readonly routes: RouteMatcher;
  /** GitHub's REST API: the Accept values that select its default JSON share one entry (src/cache/rules/key.ts). */
  readonly sharesAccept: boolean;
  /**
   * Where the upstream's addresses (its URL, origin + base path, as it appears in Link headers and
   * bodies) point for a client: the proxy's public base, per request.
   */
  readonly addresses: PublicAddresses;
  /**
   * The forms of this upstream's entries for each client (coding, Link and Location, body URLs),
   * over the memories of rewritten bodies (`rewrite_body_urls`) and of decoded gzip bodies.
   */
  readonly forms: EntryForms;
  /** The most an entry's body is decoded in one synchronous step (`cache.max_decoded_bytes`); a larger one streams. */
  readonly maxDecodedBytes: number;
  /**
   * The same upstream for a client that uses GitHub Enterprise Server's paths (`/api/v3/...`,
   * src/http/route.ts `enterpriseForm`): everything shared (its cache entries too), except that its
   * addresses point at the proxy under `/api/v3`. Undefined when the upstream does not serve them.
   */
  readonly enterprise: UpstreamRuntime | undefined;
}

/** Whether an upstream rewrites the API addresses in its JSON bodies (unset: when it has the token pool). */
export function rewritesBodyUrls(cfg: UpstreamConfig): boolean {
  return cfg.rewrite_body_urls ?? cfg.token_pool;
}

export function createUpstreamRuntime(
  cfg: UpstreamConfig,
  links: LinkSettings,
  forms: { rewritten: RewrittenForms; decoded: RewrittenForms; maxDecodedBytes?: number },
  maxEntryBytes = Number.MAX_SAFE_INTEGER,
  webhookOwners: readonly string[] = [],
  tracing: Tracing = NO_TRACING,
  onRetry?: RetryObserver,
): UpstreamRuntime {
  const client = createUpstreamClient(cfg, tracing, onRetry);
  const route = { stripPrefix: cfg.strip_prefix, prefix: cfg.prefix };
  const addresses = new PublicAddresses(links, client.origin + client.basePrefix, route, rewritesBodyUrls(cfg));
  const maxDecodedBytes = forms.maxDecodedBytes ?? maxEntryBytes;
  const rewrittenBodies = rewritesBodyUrls(cfg) ? forms.rewritten : undefined;
  const runtime: UpstreamRuntime = {
    cfg,
    client,
    policy: upstreamPolicy(cfg, webhookOwners),
    routes: createRouteMatcher(cfg.routes),
    sharesAccept: sharesEquivalentAccept(cfg),
    addresses,
    forms: new EntryForms({ addresses, rewrittenBodies, decodedForms: forms.decoded, maxDecodedBytes }),
    maxDecodedBytes,
    enterprise: undefined,
  };
  if (!servesEnterpriseForms(cfg)) return runtime;
  // Addresses under <public base>/api/v3: the route of a stripped prefix /api/v3 (src/http/representation.ts `withRoutePrefix`).
  const under = new PublicAddresses(links, addresses.upstreamBase, { stripPrefix: true, prefix: ENTERPRISE_REST_BASE }, addresses.bodies);
  const enterprise = {
    ...runtime,
    addresses: under,
    forms: new EntryForms({ addresses: under, rewrittenBodies, decodedForms: forms.decoded, maxDecodedBytes }),
  };
  return { ...runtime, enterprise };
}
