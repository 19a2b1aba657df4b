/**
 * Every metric etagere exports, declared once as data: its name, type, help text and label names
 * (and buckets, starting series or a cluster aggregation where they apply). registry.ts builds
 * the prom-client metrics from this table, in this order; no other module declares a metric.
 *
 * Names, types, labels and help text are an interface: the Grafana dashboard, the alert rules,
 * promtool and the deploy-file tests read them. Change them only together with those.
 *
 * Labels are bounded: upstream, consumer and GitHub App names come from the config (a consumer
 * labelled by its User-Agent is one of at most 50 at a time, whose series go when it drops out:
 * labels.ts), routes are
 * templates (src/http/route.ts), tokens are names (never values), and methods, status codes,
 * outcomes, operations and states are small fixed sets.
 */

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

interface SpecBase {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
}

export interface CounterSpec extends SpecBase {
  readonly type: 'counter';
  /** Per-request metric kept in plain number cells (cells.ts); exported exactly as a Counter. */
  readonly cells?: true;
  /** Label sets exported at 0 from the start, so dashboards and alerts see a series before any event (not with `cells`). */
  readonly initial?: ReadonlyArray<readonly string[]>;
}

export interface HistogramSpec extends SpecBase {
  readonly type: 'histogram';
  readonly buckets: readonly number[];
  /** Per-request metric kept in plain number cells (cells.ts); exported exactly as a Histogram. */
  readonly cells?: true;
}

export interface GaugeSpec extends SpecBase {
  readonly type: 'gauge';
  /** How the cluster primary combines the workers' values (prom-client's default is sum). */
  readonly aggregator?: 'min';
}

export type MetricSpec = CounterSpec | HistogramSpec | GaugeSpec;

export const METRIC_SPECS = {
  // Per request (hot path: request-metrics.ts).
  requests: {
    type: 'counter',
    cells: true,
    name: 'etagere_requests_total',
    help: 'Client requests answered, by upstream, route template, method and status code.',
    labelNames: ['upstream', 'route', 'method', 'status'],
  },
  requestDuration: {
    type: 'histogram',
    cells: true,
    name: 'etagere_request_duration_seconds',
    help: 'Time from request arrival to the end of the response, by upstream and route template.',
    labelNames: ['upstream', 'route'],
    buckets: LATENCY_BUCKETS,
  },
  cacheOutcomes: {
    type: 'counter',
    cells: true,
    name: 'etagere_cache_outcomes_total',
    help: 'Requests by cache outcome: hit, revalidated, miss, stale, coalesced, bypass, error.',
    labelNames: ['upstream', 'route', 'outcome'],
  },
  quotaSaved: {
    type: 'counter',
    cells: true,
    name: 'etagere_quota_saved_total',
    help: 'Client requests answered without spending upstream quota (hits, stale and coalesced answers, authorised 304 revalidations).',
    labelNames: ['upstream'],
  },
  upstreamRequests: {
    type: 'counter',
    name: 'etagere_upstream_requests_total',
    help: 'Requests sent upstream, by upstream, route template and status code (or "error").',
    labelNames: ['upstream', 'route', 'status'],
  },
  upstreamDuration: {
    type: 'histogram',
    name: 'etagere_upstream_duration_seconds',
    help: 'Time from sending a request upstream to its response headers.',
    labelNames: ['upstream', 'route'],
    buckets: LATENCY_BUCKETS,
  },
  upstreamRetries: {
    type: 'counter',
    name: 'etagere_upstream_retries_total',
    help: 'GET and HEAD requests sent upstream again after a transit failure, by upstream, reason (reset, refused, timeout, status_502, status_503, status_504) and outcome (retried, budget_exhausted: not sent, over the retry budget).',
    labelNames: ['upstream', 'reason', 'outcome'],
  },

  // Read at scrape time from the token pool and the cache (watched-gauges.ts).
  tokenRemaining: {
    type: 'gauge',
    name: 'etagere_token_remaining',
    help: 'Quota a pool token has left in its window (as last seen).',
    labelNames: ['token'],
  },
  tokenLimit: { type: 'gauge', name: 'etagere_token_limit', help: "Size of a pool token's quota window.", labelNames: ['token'] },
  tokenReset: {
    type: 'gauge',
    name: 'etagere_token_reset_timestamp_seconds',
    help: "When a pool token's window resets, as a Unix timestamp.",
    labelNames: ['token'],
  },
  tokenInflight: { type: 'gauge', name: 'etagere_token_inflight', help: 'Requests in flight on a pool token.', labelNames: ['token'] },
  tokenResourceRemaining: {
    type: 'gauge',
    name: 'etagere_token_resource_remaining',
    help: 'Quota a pool token has left in the window of one rate-limit resource (core, search, code_search, graphql, ...), as last seen.',
    labelNames: ['token', 'resource'],
  },
  tokenResourceLimit: {
    type: 'gauge',
    name: 'etagere_token_resource_limit',
    help: "Size of a pool token's window in one rate-limit resource.",
    labelNames: ['token', 'resource'],
  },
  tokenResourceReset: {
    type: 'gauge',
    name: 'etagere_token_resource_reset_timestamp_seconds',
    help: "When a pool token's window in one rate-limit resource resets, as a Unix timestamp.",
    labelNames: ['token', 'resource'],
  },
  tokenState: {
    type: 'gauge',
    name: 'etagere_token_state',
    help: 'State of each pool token (1 for its current state): ok, exhausted, paused, dead, unknown.',
    labelNames: ['token', 'state'],
  },
  poolQueueLength: { type: 'gauge', name: 'etagere_pool_queue_length', help: 'Requests waiting for a pool token slot.', labelNames: [] },
  cacheEntries: {
    type: 'gauge',
    name: 'etagere_cache_entries',
    help: 'Entries held by a cache tier (l1: in process).',
    labelNames: ['tier'],
  },
  cacheBytes: {
    type: 'gauge',
    name: 'etagere_cache_bytes',
    help: "Bytes held in process: l1 (the cache, counted against cache.max_bytes), partition_memo and route_memo (bounded memos of the key and the route labels), token_memo (the token whose entry a hit looks at first, non-equivalent pools), rewritten_bodies (bodies with API addresses rewritten, bounded at an eighth of cache.max_bytes), decoded_bodies (gzip entries decoded for clients that do not take gzip, up to an eighth of cache.max_bytes, counted within it), l2_memo (L2 values decoded once, with cache.l1 false), shared_headers (header fields common to many entries, held once, at most about 1.2 MB), log_memo (access-log values kept quoted), credential_memo (consumers' pool credentials), oidc_memo (verified OIDC tokens, by digest).",
    labelNames: ['tier'],
  },
  cacheBodyBytes: {
    type: 'gauge',
    name: 'etagere_cache_body_bytes',
    help: 'Body bytes of the entries in L1: form="stored" as kept (gzip when the upstream sent gzip), form="decoded" their size decoded.',
    labelNames: ['form'],
  },
  cacheCompressionRatio: {
    type: 'gauge',
    name: 'etagere_cache_compression_ratio',
    help: 'Decoded over stored body bytes of the entries in L1 (1 when empty): how much smaller compression keeps the cache.',
    labelNames: [],
  },
  coalescedWaiters: {
    type: 'gauge',
    name: 'etagere_coalesced_waiters',
    help: 'Requests waiting right now on another request for the same key (single flight).',
    labelNames: [],
  },

  // Observed by the modules they describe.
  redisErrors: {
    type: 'counter',
    name: 'etagere_redis_errors_total',
    help: 'Redis operations that failed or timed out, by operation.',
    labelNames: ['op'],
  },
  poolRejections: {
    type: 'counter',
    name: 'etagere_pool_rejections_total',
    help:
      'Requests no pool token could take: exhausted (429 or stale), dead (503 or stale: every token rejected), ' +
      'queue_timeout and queue_full (503 or stale), paced (429 or stale: secondary-limit points spent), ' +
      'background (background work skipped: no point or slot free at once).',
    labelNames: ['reason'],
    initial: [['exhausted'], ['dead'], ['queue_timeout'], ['queue_full'], ['paced'], ['background']],
  },
  poolPoints: {
    type: 'counter',
    name: 'etagere_pool_points_total',
    help: "Secondary-limit points spent by each pool token, by budget (rest, graphql): GitHub's table, 304s included.",
    labelNames: ['token', 'kind'],
  },
  poolExhausted: {
    type: 'counter',
    name: 'etagere_pool_exhausted_total',
    help: 'Requests that found every pool token spent or paused (answered 429, or stale from the cache).',
    labelNames: [],
  },
  cacheEvictions: {
    type: 'counter',
    name: 'etagere_cache_evictions_total',
    help: 'Entries evicted from the in-process cache to stay within its byte bound.',
    labelNames: [],
  },
  tokenEvents: {
    type: 'counter',
    name: 'etagere_token_events_total',
    help:
      'Pool token events by token name: dead (a 401 confirmed by GET /rate_limit), revived (a dead token answers again), ' +
      'exhausted (primary limit, any resource), secondary (secondary limit).',
    labelNames: ['token', 'event'],
  },
  tokenReloads: {
    type: 'counter',
    name: 'etagere_token_reloads_total',
    help:
      "Reloads of pool.tokens_file (SIGHUP, or the file changed): ok (the pool is the file's tokens now), " +
      'failed (unreadable, malformed or emptied: the pool stayed as it was).',
    labelNames: ['result'],
    initial: [['ok'], ['failed']],
  },
  consumerKeyReloads: {
    type: 'counter',
    name: 'etagere_consumer_key_reloads_total',
    help:
      "Reloads of consumers.keys_file (SIGHUP, or the file changed): ok (the consumers' keys are the file's now), " +
      'failed (unreadable, malformed, an unknown consumer, a key twice, or emptied: the keys stayed as they were).',
    labelNames: ['result'],
    initial: [['ok'], ['failed']],
  },
  appMints: {
    type: 'counter',
    name: 'etagere_app_token_mints_total',
    help:
      'Installation tokens a GitHub App of pool.apps asked for, by App name and result: ok, refused (the App was refused: ' +
      'a wrong key or app_id, an unknown App), revoked (the installation is uninstalled or suspended: dropped), ' +
      'error (network, 5xx, rate limit: retried).',
    labelNames: ['app', 'result'],
  },
  appLists: {
    type: 'counter',
    name: 'etagere_app_installation_lists_total',
    help:
      "Listings of a GitHub App's installations (installations: all), by App name and result: ok, refused (a wrong key or " +
      'app_id, an unknown App), error (network, 5xx, rate limit).',
    labelNames: ['app', 'result'],
  },
  appInstallations: {
    type: 'gauge',
    name: 'etagere_app_installations',
    help: 'Installations of a GitHub App holding a token (each one a pool member named <app>-<installation id>), by App name.',
    labelNames: ['app'],
    aggregator: 'min',
  },
  tokenSwitchRevalidations: {
    type: 'counter',
    name: 'etagere_token_switch_revalidations_total',
    help: 'Revalidations sent with another token than the one that stored the entry (it was exhausted, dead or paused).',
    labelNames: [],
  },
  refreshAhead: {
    type: 'counter',
    name: 'etagere_refresh_ahead_total',
    help: 'Background revalidations of entries read during their lifetime, ahead of expiry (cache.refresh_ahead), by result.',
    labelNames: ['result'],
  },
  queueWait: {
    type: 'histogram',
    name: 'etagere_queue_wait_seconds',
    help: 'Time requests waited for a pool token slot (only requests that waited).',
    labelNames: [],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  },
  consumerRequests: {
    type: 'counter',
    cells: true,
    name: 'etagere_consumer_requests_total',
    help: "Requests by consumer (metrics.consumer_label: a consumer key's name, or a User-Agent's product) and route template.",
    labelNames: ['consumer', 'route'],
  },
  consumerRejections: {
    type: 'counter',
    name: 'etagere_consumer_rejections_total',
    help:
      'Requests refused to consumers, by consumer (its label; "-" when unknown) and reason: key (401: no known consumer key), ' +
      'token (401: an OIDC token failed a check), scope (403: no allow rule matches), claim (403: a claim value not allowed in a scope).',
    labelNames: ['consumer', 'reason'],
    initial: [['-', 'key']],
  },
  graphqlRefused: {
    type: 'counter',
    name: 'etagere_graphql_refused_total',
    help: 'Pooled GraphQL calls refused before reaching the upstream, by upstream and reason (mutation, subscription, parse, limits, operation, bad_json, too_large).',
    labelNames: ['upstream', 'reason'],
  },
  consumerHits: {
    type: 'counter',
    cells: true,
    name: 'etagere_consumer_hits_total',
    help: 'Requests answered from the cache (fresh hits), by consumer (metrics.consumer_label) and route template.',
    labelNames: ['consumer', 'route'],
  },
  consumerUpstreamRequests: {
    type: 'counter',
    cells: true,
    name: 'etagere_consumer_upstream_requests_total',
    help:
      'Requests that went upstream (an upstream status came back: one per exchange, as etagere_upstream_requests_total), ' +
      'by consumer (metrics.consumer_label) and route template.',
    labelNames: ['consumer', 'route'],
  },
  consumerQuotaSpent: {
    type: 'counter',
    name: 'etagere_consumer_quota_spent_total',
    help: 'Units of pool quota a consumer spent (answers other than 304 and 401/403/429), by consumer name and rate-limit resource.',
    labelNames: ['consumer', 'resource'],
  },
  consumerShareRejections: {
    type: 'counter',
    name: 'etagere_consumer_share_rejections_total',
    help:
      'Pool requests refused for one consumer while the others go on: share (429: its fair share and what it may borrow are spent), ' +
      'max_per_hour (429: its hourly cap), max_concurrency (503: no slot of its own freed up in time).',
    labelNames: ['consumer', 'reason'],
  },
  // min: summed over cluster workers, "up" would count workers; the machine is up only if all are.
  redisUp: {
    type: 'gauge',
    name: 'etagere_redis_up',
    help: '1 while the Redis connection is ready, else 0.',
    labelNames: [],
    aggregator: 'min',
  },
  redisOps: {
    type: 'counter',
    name: 'etagere_redis_operations_total',
    help: 'Redis operations by name and result: ok, error (failed or timed out), skipped (disconnected or circuit breaker open).',
    labelNames: ['op', 'result'],
  },
  redisLatency: {
    type: 'histogram',
    name: 'etagere_redis_duration_seconds',
    help: 'Latency of successful Redis operations, by operation.',
    labelNames: ['op'],
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
  },
  l2Lookups: {
    type: 'counter',
    name: 'etagere_l2_lookups_total',
    help: 'Shared (Redis) cache lookups after an L1 miss: hit, miss, corrupt (a value that does not decode), skipped (Redis unavailable).',
    labelNames: ['result'],
  },
  flightLocks: {
    type: 'counter',
    name: 'etagere_flight_locks_total',
    help:
      'Distributed single flight on L1+L2 misses: won (this replica fetched), followed (served what another replica fetched), ' +
      'gone, timeout (then fetched itself), unavailable (no Redis).',
    labelNames: ['result'],
  },
  // Webhooks, purges and stale marks (src/paths/webhooks/, src/cache/store/memory-store.ts, src/paths/admin/admin-cache.ts).
  webhookDeliveries: {
    type: 'counter',
    name: 'etagere_webhook_deliveries_total',
    help:
      'Webhook deliveries by event (a known event name, "other" for the rest, "-" before the signature is checked) and outcome: ' +
      'applied, duplicate (its X-GitHub-Delivery was seen: acknowledged, not applied again), ignored (an event that marks nothing), ' +
      'bad_signature (401), too_large (413), too_slow (408: not read whole within webhooks.read_timeout_ms or at the floor rate), ' +
      'busy (503: its read slot went to a later delivery), bad_request (400: no delivery id, a payload that does not parse), method (405).',
    labelNames: ['event', 'outcome'],
    initial: [['-', 'bad_signature']],
  },
  cacheInvalidations: {
    type: 'counter',
    name: 'etagere_cache_invalidations_total',
    help: 'Cache entries marked stale (kept, to be revalidated on their next use) in this process, by source: webhook, purge.',
    labelNames: ['source'],
    initial: [['webhook'], ['purge']],
  },
  cachePurges: {
    type: 'counter',
    name: 'etagere_cache_purges_total',
    help:
      'Calls of POST /admin/purge, by scope: path (one path marked stale), prefix (a path and everything below) ' +
      'or tag (every entry filed under a tag dropped).',
    labelNames: ['scope'],
    initial: [['path'], ['prefix'], ['tag']],
  },
  cacheRequests: {
    type: 'counter',
    name: 'etagere_cache_requests_total',
    help:
      'GraphQL queries by cache result (hit, miss, coalesced) under route "/graphql", by operation name ' +
      '(the first 50 names seen, then "other"; "anonymous" for an unnamed operation).',
    labelNames: ['upstream', 'route', 'operation', 'result'],
  },
  cacheTagPurges: {
    type: 'counter',
    name: 'etagere_cache_tag_purges_total',
    help: 'Cache entries dropped because a tag they were filed under was purged, by source: webhook, mutation, purge.',
    labelNames: ['source'],
    initial: [['webhook'], ['mutation'], ['purge']],
  },
  webhookStaleness: {
    type: 'histogram',
    name: 'etagere_webhook_staleness_seconds',
    help:
      'Staleness window: from a webhook delivery to the first revalidation of an entry it marked that brought a changed representation ' +
      '(once per delivery and process).',
    labelNames: [],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600],
  },
} as const satisfies Record<string, MetricSpec>;

export type MetricKey = keyof typeof METRIC_SPECS;

/** The label names of one metric (prom-client's default `string` for a metric without labels). */
export type LabelName<K extends MetricKey> = (typeof METRIC_SPECS)[K]['labelNames'] extends readonly []
  ? string
  : (typeof METRIC_SPECS)[K]['labelNames'][number];
