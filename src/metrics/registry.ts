/**
 * Declares every metric. Other modules receive a `Metrics` object and observe; none declares its own.
 * Each app instance owns a Registry, so several proxies can run in one process (tests, workers).
 *
 * Labels are bounded: upstream names and consumer names come from the config, routes are
 * templates (src/metrics/route-template.ts), tokens are names (never values), and methods,
 * status codes, outcomes, operations and states are small fixed sets.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { CellCounter, CellHistogram, type CountCell, type HistogramCell } from './cells.js';
import { createRecentStats, type RecentStats } from './recent.js';

/** What the token gauges read at scrape time (names only, never values). */
export interface PoolGaugeSource {
  tokens(): ReadonlyArray<{ name: string; state: string; limit: number | null; remaining: number | null; reset: number | null; in_flight: number }>;
  queueLength(): number;
}

/** What the cache gauges read at scrape time. */
export interface CacheGaugeSource {
  l1Entries(): number;
  l1Bytes(): number;
  /** Callers currently waiting on another caller's upstream exchange. */
  waiters(): number;
}

const TOKEN_STATES = ['ok', 'exhausted', 'paused', 'dead', 'unknown'] as const;

/** Outcomes that answered a client without spending upstream quota (an authorised 304 is free on GitHub). */
const SAVING = new Set(['hit', 'stale', 'coalesced']);

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface Metrics {
  readonly registry: Registry;
  /** The last five minutes, for the status page. */
  readonly recent: RecentStats;
  readonly requests: CellCounter<'upstream' | 'route' | 'method' | 'status'>;
  readonly requestDuration: CellHistogram<'upstream' | 'route'>;
  readonly upstreamRequests: Counter<'upstream' | 'route' | 'status'>;
  readonly upstreamDuration: Histogram<'upstream' | 'route'>;
  readonly cacheOutcomes: CellCounter<'upstream' | 'route' | 'outcome'>;
  readonly quotaSaved: CellCounter<'upstream'>;
  readonly cacheEvictions: Counter;
  /** Token pool events by token name: dead, exhausted, secondary. */
  readonly tokenEvents: Counter<'token' | 'event'>;
  /** Revalidations that could not use the token that stored the entry. */
  readonly tokenSwitchRevalidations: Counter;
  /** Requests the pool could not serve: exhausted (429), dead, queue_timeout or queue_full (503). */
  readonly poolRejections: Counter<'reason'>;
  readonly poolExhausted: Counter;
  readonly queueWait: Histogram;
  /** Pool requests per consumer (consumer access control). */
  readonly consumerRequests: Counter<'consumer'>;
  readonly consumerRejections: Counter;
  /** 1 while the Redis connection is ready. */
  readonly redisUp: Gauge;
  /** Redis operations by name and result: ok, error, skipped (disconnected or breaker open). */
  readonly redisOps: Counter<'op' | 'result'>;
  readonly redisErrors: Counter<'op'>;
  readonly redisLatency: Histogram<'op'>;
  /** L2 lookups by result: hit, miss, corrupt, skipped. */
  readonly l2Lookups: Counter<'result'>;
  /** Distributed single flight: lock won, waited for another replica (served from L2), or gave up waiting. */
  readonly flightLocks: Counter<'result'>;
  /** Registers the pool whose tokens the etagere_token_* gauges report. */
  watchPool(source: PoolGaugeSource): void;
  /** Registers the cache whose size the etagere_cache_* gauges report. */
  watchCache(source: CacheGaugeSource): void;
  /** Counts one request sent upstream, by its status (or "error" when none came back), and its time to headers. */
  countUpstream(upstream: string, route: string, status: number | 'error', seconds?: number): void;
  /**
   * Records one answered request (hot path: label children are looked up once and reused).
   * `authorized`: the upstream exchange, if any, carried a credential (its 304s are free).
   */
  observeRequest(upstream: string, route: string, method: string, status: number, outcome: string | undefined, seconds: number, authorized: boolean): void;
}

/** A label-child cache: children of bounded label sets are resolved once and kept. */
function children<T>(make: (labels: string[]) => T): (...labels: string[]) => T {
  const map = new Map<string, T>();
  return (...labels) => {
    const k = labels.join('\u0000');
    let c = map.get(k);
    if (c === undefined) {
      c = make(labels);
      map.set(k, c);
    }
    return c;
  };
}

export function createMetrics(opts: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (opts.defaultMetrics !== false) {
    collectDefaultMetrics({ register: registry, prefix: 'etagere_' });
    // Gauges that prom-client names *_total, which `promtool check metrics` rejects; the same
    // numbers by type remain in etagere_nodejs_active_{handles,requests,resources}.
    for (const name of ['etagere_nodejs_active_handles_total', 'etagere_nodejs_active_requests_total', 'etagere_nodejs_active_resources_total']) {
      registry.removeSingleMetric(name);
    }
  }
  const registers = [registry];

  const requests = new CellCounter({
    name: 'etagere_requests_total',
    help: 'Client requests answered, by upstream, route template, method and status code.',
    labelNames: ['upstream', 'route', 'method', 'status'] as const,
    registers,
  });
  const requestDuration = new CellHistogram({
    name: 'etagere_request_duration_seconds',
    help: 'Time from request arrival to the end of the response, by upstream and route template.',
    labelNames: ['upstream', 'route'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const cacheOutcomes = new CellCounter({
    name: 'etagere_cache_outcomes_total',
    help: 'Requests by cache outcome: hit, revalidated, miss, stale, coalesced, bypass, error.',
    labelNames: ['upstream', 'route', 'outcome'] as const,
    registers,
  });
  const quotaSaved = new CellCounter({
    name: 'etagere_quota_saved_total',
    help: 'Client requests answered without spending upstream quota (hits, stale and coalesced answers, authorised 304 revalidations).',
    labelNames: ['upstream'] as const,
    registers,
  });
  const upstreamRequests = new Counter({
    name: 'etagere_upstream_requests_total',
    help: 'Requests sent upstream, by upstream, route template and status code (or "error").',
    labelNames: ['upstream', 'route', 'status'] as const,
    registers,
  });
  const upstreamDuration = new Histogram({
    name: 'etagere_upstream_duration_seconds',
    help: 'Time from sending a request upstream to its response headers.',
    labelNames: ['upstream', 'route'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });

  // The per-request cells (hot path): one key string per request, then plain additions.
  const perRequest = new Map<string, { requests: CountCell; duration: HistogramCell }>();
  const perOutcome = new Map<string, { outcome: CountCell; saved: CountCell }>();
  const upstreamChild = children((l) => upstreamRequests.labels(...(l as [string, string, string])));
  const upstreamDurationChild = children((l) => upstreamDuration.labels(...(l as [string, string])));

  let poolSource: PoolGaugeSource | undefined;
  let cacheSource: CacheGaugeSource | undefined;
  const tokenGauge = (name: string, help: string, read: (t: ReturnType<PoolGaugeSource['tokens']>[number]) => number | null): void => {
    new Gauge({
      name,
      help,
      labelNames: ['token'] as const,
      registers,
      collect() {
        this.reset();
        for (const t of poolSource?.tokens() ?? []) {
          const v = read(t);
          if (v !== null) this.set({ token: t.name }, v);
        }
      },
    });
  };
  tokenGauge('etagere_token_remaining', 'Quota a pool token has left in its window (as last seen).', (t) => t.remaining);
  tokenGauge('etagere_token_limit', "Size of a pool token's quota window.", (t) => t.limit);
  tokenGauge('etagere_token_reset_timestamp_seconds', "When a pool token's window resets, as a Unix timestamp.", (t) => t.reset);
  tokenGauge('etagere_token_inflight', 'Requests in flight on a pool token.', (t) => t.in_flight);
  new Gauge({
    name: 'etagere_token_state',
    help: 'State of each pool token (1 for its current state): ok, exhausted, paused, dead, unknown.',
    labelNames: ['token', 'state'] as const,
    registers,
    collect() {
      this.reset();
      for (const t of poolSource?.tokens() ?? []) for (const st of TOKEN_STATES) this.set({ token: t.name, state: st }, t.state === st ? 1 : 0);
    },
  });
  new Gauge({
    name: 'etagere_pool_queue_length',
    help: 'Requests waiting for a pool token slot.',
    registers,
    collect() {
      this.set(poolSource?.queueLength() ?? 0);
    },
  });
  new Gauge({
    name: 'etagere_cache_entries',
    help: 'Entries held by a cache tier (l1: in process).',
    labelNames: ['tier'] as const,
    registers,
    collect() {
      this.set({ tier: 'l1' }, cacheSource?.l1Entries() ?? 0);
    },
  });
  new Gauge({
    name: 'etagere_cache_bytes',
    help: 'Bytes held by a cache tier (l1: in process, as counted against cache.max_bytes).',
    labelNames: ['tier'] as const,
    registers,
    collect() {
      this.set({ tier: 'l1' }, cacheSource?.l1Bytes() ?? 0);
    },
  });
  new Gauge({
    name: 'etagere_coalesced_waiters',
    help: 'Requests waiting right now on another request for the same key (single flight).',
    registers,
    collect() {
      this.set(cacheSource?.waiters() ?? 0);
    },
  });

  const redisErrors = new Counter({
    name: 'etagere_redis_errors_total',
    help: 'Redis operations that failed or timed out, by operation.',
    labelNames: ['op'] as const,
    registers,
  });
  const poolRejections = new Counter({
    name: 'etagere_pool_rejections_total',
    help: 'Requests no pool token could take: exhausted (429 or stale), dead (503 or stale: every token rejected), queue_timeout and queue_full (503 or stale).',
    labelNames: ['reason'] as const,
    registers,
  });
  // Every reason is exported from the start (at 0), so dashboards and alerts see a series.
  for (const reason of ['exhausted', 'dead', 'queue_timeout', 'queue_full']) poolRejections.labels(reason).inc(0);
  const poolExhausted = new Counter({
    name: 'etagere_pool_exhausted_total',
    help: 'Requests that found every pool token spent or paused (answered 429, or stale from the cache).',
    registers,
  });

  const recent = createRecentStats();
  return {
    registry,
    recent,
    requests,
    requestDuration,
    upstreamRequests,
    upstreamDuration,
    cacheOutcomes,
    quotaSaved,
    cacheEvictions: new Counter({
      name: 'etagere_cache_evictions_total',
      help: 'Entries evicted from the in-process cache to stay within its byte bound.',
      registers,
    }),
    tokenEvents: new Counter({
      name: 'etagere_token_events_total',
      help: 'Pool token events by token name: dead (401), exhausted (primary limit), secondary (secondary limit).',
      labelNames: ['token', 'event'] as const,
      registers,
    }),
    tokenSwitchRevalidations: new Counter({
      name: 'etagere_token_switch_revalidations_total',
      help: 'Revalidations sent with another token than the one that stored the entry (it was exhausted, dead or paused).',
      registers,
    }),
    poolRejections,
    poolExhausted,
    queueWait: new Histogram({
      name: 'etagere_queue_wait_seconds',
      help: 'Time requests waited for a pool token slot (only requests that waited).',
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    consumerRequests: new Counter({
      name: 'etagere_consumer_requests_total',
      help: 'Requests that used the token pool, by consumer name (consumer access control).',
      labelNames: ['consumer'] as const,
      registers,
    }),
    consumerRejections: new Counter({
      name: 'etagere_consumer_rejections_total',
      help: 'Requests refused with 401 for lack of a known consumer key.',
      registers,
    }),
    // min: summed over cluster workers, "up" would count workers; the machine is up only if all are.
    redisUp: new Gauge({ name: 'etagere_redis_up', help: '1 while the Redis connection is ready, else 0.', registers, aggregator: 'min' }),
    redisOps: new Counter({
      name: 'etagere_redis_operations_total',
      help: 'Redis operations by name and result: ok, error (failed or timed out), skipped (disconnected or circuit breaker open).',
      labelNames: ['op', 'result'] as const,
      registers,
    }),
    redisErrors,
    redisLatency: new Histogram({
      name: 'etagere_redis_duration_seconds',
      help: 'Latency of successful Redis operations, by operation.',
      labelNames: ['op'] as const,
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
      registers,
    }),
    l2Lookups: new Counter({
      name: 'etagere_l2_lookups_total',
      help: 'Shared (Redis) cache lookups after an L1 miss: hit, miss, corrupt (a value that does not decode), skipped (Redis unavailable).',
      labelNames: ['result'] as const,
      registers,
    }),
    flightLocks: new Counter({
      name: 'etagere_flight_locks_total',
      help: 'Distributed single flight on L1+L2 misses: won (this replica fetched), followed (served what another replica fetched), gone, timeout (then fetched itself), unavailable (no Redis).',
      labelNames: ['result'] as const,
      registers,
    }),
    watchPool: (source) => {
      poolSource = source;
    },
    watchCache: (source) => {
      cacheSource = source;
    },
    countUpstream: (upstream, route, status, seconds) => {
      upstreamChild(upstream, route, String(status)).inc();
      recent.upstream(upstream, status);
      if (seconds !== undefined) upstreamDurationChild(upstream, route).observe(seconds);
    },
    observeRequest: (upstream, route, method, status, outcome, seconds, authorized) => {
      const rk = `${upstream}\u0000${route}\u0000${method}\u0000${status}`;
      let r = perRequest.get(rk);
      if (r === undefined) {
        r = { requests: requests.cell(upstream, route, method, String(status)), duration: requestDuration.cell(upstream, route) };
        perRequest.set(rk, r);
      }
      r.requests.value++;
      r.duration.observe(seconds);
      let saved = false;
      if (outcome !== undefined) {
        const ok = `${upstream}\u0000${route}\u0000${outcome}`;
        let o = perOutcome.get(ok);
        if (o === undefined) {
          o = { outcome: cacheOutcomes.cell(upstream, route, outcome), saved: quotaSaved.cell(upstream) };
          perOutcome.set(ok, o);
        }
        o.outcome.value++;
        saved = SAVING.has(outcome) || (outcome === 'revalidated' && authorized);
        if (saved) o.saved.value++;
      }
      recent.request(saved, outcome === 'hit');
    },
  };
}
