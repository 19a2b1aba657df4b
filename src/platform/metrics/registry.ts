/**
 * The `Metrics` object every other module receives: it observes through it and declares no
 * metric of its own. Each app instance owns one (a Registry of its own), so several proxies can
 * run in one process (tests, cluster workers).
 *
 *   specs.ts            every metric as data (name, type, help, labels)
 *   build.ts            the table built into prom-client metrics
 *   request-metrics.ts  the per-request hot path: observeRequest, countUpstream; the recent window
 *   watched-gauges.ts   gauges read at scrape time from the pool and cache (watchPool, watchCache)
 *   quota-windows.ts    who spent the quota on what, for /admin/quota (labels.ts: who); the busiest paths
 *   labels.ts           the label-child cache they share; consumer labels
 */
import { Registry, collectDefaultMetrics } from 'prom-client';
import { buildMetrics, type BuiltMetrics } from './build.js';
import { createRecentStats, createRequestMetrics, type RecentStats, type RequestMetrics } from './request-metrics.js';
import { createQuotaWindows, createTopPaths, type QuotaWindows, type TopPaths } from './quota-windows.js';
import type { CacheGaugeSource, GaugeSources, PoolGaugeSource } from './watched-gauges.js';

/** The metrics other modules observe directly (help texts in specs.ts). */
type Observed =
  | 'cacheEvictions'
  | 'tokenEvents'
  | 'tokenReloads'
  | 'consumerKeyReloads'
  | 'appMints'
  | 'appLists'
  | 'appInstallations'
  | 'tokenSwitchRevalidations'
  | 'refreshAhead'
  | 'poolRejections'
  | 'poolExhausted'
  | 'poolPoints'
  | 'queueWait'
  | 'consumerRequests'
  | 'consumerRejections'
  | 'graphqlRefused'
  | 'upstreamRetries'
  | 'consumerHits'
  | 'consumerUpstreamRequests'
  | 'consumerQuotaSpent'
  | 'consumerShareRejections'
  | 'redisUp'
  | 'redisOps'
  | 'redisErrors'
  | 'redisLatency'
  | 'l2Lookups'
  | 'flightLocks'
  | 'webhookDeliveries'
  | 'cacheInvalidations'
  | 'cachePurges'
  | 'cacheRequests'
  | 'cacheTagPurges'
  | 'webhookStaleness';

export interface Metrics extends RequestMetrics, Pick<BuiltMetrics, Observed> {
  readonly registry: Registry;
  /** The last five minutes, for the status page. */
  readonly recent: RecentStats;
  /** The busiest paths by hits and by upstream spend, for /admin/cache/stats. */
  readonly topPaths: TopPaths;
  /** Upstream and billable requests by consumer and route over the last 5 minutes, hour and day, for /admin/quota. */
  readonly quota: QuotaWindows;
  /** Registers the pool whose tokens the etagere_token_* gauges report. */
  watchPool(source: PoolGaugeSource): void;
  /** Registers the cache whose size the etagere_cache_* gauges report. */
  watchCache(source: CacheGaugeSource): void;
}

/** Node process metrics (etagere_process_*, etagere_nodejs_*), minus the ones promtool rejects. */
function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, prefix: 'etagere_' });
  // Gauges that prom-client names *_total, which `promtool check metrics` rejects; the same
  // numbers by type remain in etagere_nodejs_active_{handles,requests,resources}.
  for (const name of [
    'etagere_nodejs_active_handles_total',
    'etagere_nodejs_active_requests_total',
    'etagere_nodejs_active_resources_total',
  ]) {
    registry.removeSingleMetric(name);
  }
}

export function createMetrics(opts: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (opts.defaultMetrics !== false) collectProcessMetrics(registry);
  const sources: GaugeSources = {};
  const built = buildMetrics(registry, sources);
  const recent = createRecentStats();
  const { countUpstream, observeRequest, requestCell, observeCell } = createRequestMetrics(built, recent);
  return {
    registry,
    recent,
    topPaths: createTopPaths(),
    quota: createQuotaWindows(),
    countUpstream,
    observeRequest,
    requestCell,
    observeCell,
    cacheEvictions: built.cacheEvictions,
    tokenEvents: built.tokenEvents,
    tokenReloads: built.tokenReloads,
    consumerKeyReloads: built.consumerKeyReloads,
    appMints: built.appMints,
    appLists: built.appLists,
    appInstallations: built.appInstallations,
    tokenSwitchRevalidations: built.tokenSwitchRevalidations,
    refreshAhead: built.refreshAhead,
    poolRejections: built.poolRejections,
    poolExhausted: built.poolExhausted,
    poolPoints: built.poolPoints,
    queueWait: built.queueWait,
    consumerRequests: built.consumerRequests,
    consumerRejections: built.consumerRejections,
    graphqlRefused: built.graphqlRefused,
    upstreamRetries: built.upstreamRetries,
    consumerHits: built.consumerHits,
    consumerUpstreamRequests: built.consumerUpstreamRequests,
    consumerQuotaSpent: built.consumerQuotaSpent,
    consumerShareRejections: built.consumerShareRejections,
    redisUp: built.redisUp,
    redisOps: built.redisOps,
    redisErrors: built.redisErrors,
    redisLatency: built.redisLatency,
    l2Lookups: built.l2Lookups,
    flightLocks: built.flightLocks,
    webhookDeliveries: built.webhookDeliveries,
    cacheInvalidations: built.cacheInvalidations,
    cachePurges: built.cachePurges,
    cacheRequests: built.cacheRequests,
    cacheTagPurges: built.cacheTagPurges,
    webhookStaleness: built.webhookStaleness,
    watchPool: (source) => {
      sources.pool = source;
    },
    watchCache: (source) => {
      sources.cache = source;
    },
  };
}
