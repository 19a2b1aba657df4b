/** Per-upstream runtime: its config, client, route templates, links and freshness policy, built once. */
import type { UpstreamConfig } from '../platform/config/schema.js';
import type { UpstreamPolicy } from '../cache/rules/policy.js';
import { DEFAULT_ROUTES, createRouteMatcher, type RouteMatcher } from '../http/route-template.js';
import { createUpstreamClient, type UpstreamClient } from '../upstream/client.js';
import { PublicAddresses, type LinkSettings } from '../http/representation/public-addresses.js';
import { EntryForms, type RewrittenForms } from '../cache/store/entry-form.js';
import { upstreamPolicy } from '../cache/rules/webhook-coverage.js';

export interface UpstreamRuntime {
  readonly cfg: UpstreamConfig;
  readonly client: UpstreamClient;
  /** Its freshness policy: the kind, and the policy for one client path (src/cache/rules/policy.ts `UpstreamPolicy`). */
  readonly policy: UpstreamPolicy;
  /** Route templates for metric labels. */
  readonly routes: RouteMatcher;
  /** Upstream URL (origin + base path, no trailing slash), as it appears in Link headers. */
  readonly linkBase: string;
  /** Where rewritten Link headers point (the proxy's public base). */
  readonly links: LinkSettings;
  /** Where the upstream's addresses (Link, Location, body URLs) point for a client, per request. */
  readonly addresses: PublicAddresses;
  /** The forms of this upstream's entries for each client (coding, Link and Location, body URLs). */
  readonly forms: EntryForms;
  /** The memory of rewritten bodies when the upstream rewrites body URLs (`rewrite_body_urls`), else undefined. */
  readonly rewrittenBodies: RewrittenForms | undefined;
  /** The memory of decoded forms of gzip entries, for clients that do not take gzip (entry-form.ts). */
  readonly decodedForms: RewrittenForms;
  /** The most an entry's body is decoded in one synchronous step (`cache.max_decoded_bytes`); a larger one streams. */
  readonly maxDecodedBytes: number;
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
): UpstreamRuntime {
  const client = createUpstreamClient(cfg);
  const linkBase = client.origin + client.basePrefix;
  const addresses = new PublicAddresses(links, linkBase, { stripPrefix: cfg.strip_prefix, prefix: cfg.prefix }, rewritesBodyUrls(cfg));
  const bodies = {
    rewrittenBodies: rewritesBodyUrls(cfg) ? forms.rewritten : undefined,
    decodedForms: forms.decoded,
    maxDecodedBytes: forms.maxDecodedBytes ?? maxEntryBytes,
  };
  return {
    cfg,
    client,
    policy: upstreamPolicy(cfg, webhookOwners),
    routes: createRouteMatcher([...cfg.routes, ...DEFAULT_ROUTES]),
    linkBase,
    links,
    addresses,
    ...bodies,
    forms: new EntryForms({ addresses, ...bodies }),
  };
}
