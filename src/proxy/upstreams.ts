/** Per-upstream runtime: its config, client, pass-through and freshness policy, built once. */
import type { UpstreamConfig } from '../config/schema.js';
import type { FreshnessPolicy } from '../cache/policy.js';
import { DEFAULT_ROUTES, createRouteMatcher, type RouteMatcher } from '../metrics/route-template.js';
import { createUpstreamClient, type UpstreamClient } from '../upstream/client.js';
import type { LinkSettings } from './answer.js';
import { createPassThrough, type PassThrough } from './pass-through.js';

export interface UpstreamRuntime {
  readonly cfg: UpstreamConfig;
  readonly client: UpstreamClient;
  readonly passThrough: PassThrough | undefined;
  readonly policy: FreshnessPolicy;
  /** Route templates for metric labels. */
  readonly routes: RouteMatcher;
  /** Upstream URL (origin + base path, no trailing slash), as it appears in Link headers. */
  readonly linkBase: string;
  /** Where rewritten Link headers point (the proxy's public base). */
  readonly links: LinkSettings;
}

export function policyOf(cfg: UpstreamConfig): FreshnessPolicy {
  return {
    kind: cfg.cache.policy,
    ttl: cfg.cache.ttl_seconds ?? 0,
    maxAgeCap: cfg.cache.max_age_cap_seconds,
    staleIfError: cfg.cache.stale_if_error_seconds,
    staleWhileRevalidate: cfg.cache.stale_while_revalidate_seconds,
    heuristicFraction: cfg.cache.heuristic_fraction,
  };
}

export function createUpstreamRuntime(
  cfg: UpstreamConfig,
  links: LinkSettings,
  onUnsafeResponse: (cfg: UpstreamConfig, pathname: string, status: number) => void,
): UpstreamRuntime {
  const client = createUpstreamClient(cfg);
  return {
    cfg,
    client,
    passThrough: cfg.pass_through ? createPassThrough(cfg, onUnsafeResponse, links) : undefined,
    policy: policyOf(cfg),
    routes: createRouteMatcher([...cfg.routes, ...DEFAULT_ROUTES]),
    linkBase: client.origin + client.basePrefix,
    links,
  };
}
