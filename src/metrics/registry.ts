/**
 * Declares every metric. Other modules receive a `Metrics` object and observe; none declares its own.
 * Each app instance owns a Registry, so several proxies can run in one process (tests, workers).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** What the token gauges read at scrape time (names only, never values). */
export interface PoolGaugeSource {
  tokens(): ReadonlyArray<{ name: string; state: string; limit: number | null; remaining: number | null; reset: number | null; in_flight: number }>;
  queueLength(): number;
}

const TOKEN_STATES = ['ok', 'exhausted', 'paused', 'dead', 'unknown'] as const;

export interface Metrics {
  readonly registry: Registry;
  readonly requests: Counter<'upstream' | 'method' | 'status'>;
  readonly requestDuration: Histogram<'upstream'>;
  readonly upstreamRequests: Counter<'upstream' | 'status'>;
  readonly cacheOutcomes: Counter<'upstream' | 'outcome'>;
  readonly cacheEvictions: Counter;
  /** Token pool events by token name: dead, exhausted, secondary. */
  readonly tokenEvents: Counter<'token' | 'event'>;
  /** Revalidations that could not use the token that stored the entry. */
  readonly tokenSwitchRevalidations: Counter;
  /** Requests the pool could not serve: exhausted (429), queue_timeout or queue_full (503). */
  readonly poolRejections: Counter<'reason'>;
  readonly poolQueueWait: Histogram;
  /** Pool requests per consumer (consumer access control). */
  readonly consumerRequests: Counter<'consumer'>;
  readonly consumerRejections: Counter;
  /** 1 while the Redis connection is ready. */
  readonly redisUp: Gauge;
  /** Redis operations by name and result: ok, error, skipped (disconnected or breaker open). */
  readonly redisOps: Counter<'op' | 'result'>;
  readonly redisLatency: Histogram<'op'>;
  /** L2 lookups by result: hit, miss, corrupt, skipped. */
  readonly l2Lookups: Counter<'result'>;
  /** Distributed single flight: lock won, waited for another replica (served from L2), or gave up waiting. */
  readonly flightLocks: Counter<'result'>;
  /** Registers the pool whose tokens the etagere_token_* gauges report. */
  watchPool(source: PoolGaugeSource): void;
  /** Counts one request sent upstream, by its status (or "error" when none came back). */
  countUpstream(upstream: string, status: number | 'error'): void;
  /** Records one answered request (hot path: label children are looked up once and reused). */
  observeRequest(upstream: string, method: string, status: number, outcome: string | undefined, seconds: number): void;
}

export function createMetrics(opts: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'etagere_' });
  const requests = new Counter({
    name: 'etagere_requests_total',
    help: 'Client requests answered, by upstream, method and status code.',
    labelNames: ['upstream', 'method', 'status'] as const,
    registers: [registry],
  });
  const requestDuration = new Histogram({
    name: 'etagere_request_duration_seconds',
    help: 'Time from request arrival to the end of the response.',
    labelNames: ['upstream'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const cacheOutcomes = new Counter({
    name: 'etagere_cache_outcomes_total',
    help: 'Cacheable requests by outcome: hit, revalidated, miss, stale, coalesced, bypass, error.',
    labelNames: ['upstream', 'outcome'] as const,
    registers: [registry],
  });
  // Label sets are bounded (upstream names from config, methods, status codes, outcomes), so
  // the children can be kept for the life of the process.
  const requestChildren = new Map<string, { inc(): void }>();
  const durationChildren = new Map<string, { observe(v: number): void }>();
  const outcomeChildren = new Map<string, { inc(): void }>();
  const observeRequest: Metrics['observeRequest'] = (upstream, method, status, outcome, seconds) => {
    const rk = `${upstream} ${method} ${status}`;
    let r = requestChildren.get(rk);
    if (r === undefined) {
      r = requests.labels(upstream, method, String(status));
      requestChildren.set(rk, r);
    }
    r.inc();
    let d = durationChildren.get(upstream);
    if (d === undefined) {
      d = requestDuration.labels(upstream);
      durationChildren.set(upstream, d);
    }
    d.observe(seconds);
    if (outcome !== undefined) {
      const ok = `${upstream} ${outcome}`;
      let o = outcomeChildren.get(ok);
      if (o === undefined) {
        o = cacheOutcomes.labels(upstream, outcome);
        outcomeChildren.set(ok, o);
      }
      o.inc();
    }
  };
  const upstreamRequests = new Counter({
    name: 'etagere_upstream_requests_total',
    help: 'Requests sent upstream, by upstream and status code (or "error").',
    labelNames: ['upstream', 'status'] as const,
    registers: [registry],
  });
  let poolSource: PoolGaugeSource | undefined;
  const tokenGauge = (name: string, help: string, read: (t: ReturnType<PoolGaugeSource['tokens']>[number]) => number | null): void => {
    new Gauge({
      name,
      help,
      labelNames: ['token'] as const,
      registers: [registry],
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
  tokenGauge('etagere_token_reset_seconds', "When a pool token's window resets, epoch seconds.", (t) => t.reset);
  tokenGauge('etagere_token_in_flight', 'Requests in flight on a pool token.', (t) => t.in_flight);
  new Gauge({
    name: 'etagere_token_state',
    help: 'State of each pool token (1 for its current state): ok, exhausted, paused, dead, unknown.',
    labelNames: ['token', 'state'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const t of poolSource?.tokens() ?? []) for (const st of TOKEN_STATES) this.set({ token: t.name, state: st }, t.state === st ? 1 : 0);
    },
  });
  new Gauge({
    name: 'etagere_pool_queue_length',
    help: 'Requests waiting for a pool token slot.',
    registers: [registry],
    collect() {
      this.set(poolSource?.queueLength() ?? 0);
    },
  });
  return {
    registry,
    redisUp: new Gauge({ name: 'etagere_redis_up', help: '1 while the Redis connection is ready, else 0.', registers: [registry] }),
    redisOps: new Counter({
      name: 'etagere_redis_operations_total',
      help: 'Redis operations by name and result: ok, error (failed or timed out), skipped (disconnected or circuit breaker open).',
      labelNames: ['op', 'result'] as const,
      registers: [registry],
    }),
    redisLatency: new Histogram({
      name: 'etagere_redis_operation_duration_seconds',
      help: 'Latency of successful Redis operations.',
      labelNames: ['op'] as const,
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
      registers: [registry],
    }),
    l2Lookups: new Counter({
      name: 'etagere_l2_lookups_total',
      help: 'Shared (Redis) cache lookups after an L1 miss: hit, miss, corrupt (a value that does not decode), skipped (Redis unavailable).',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    flightLocks: new Counter({
      name: 'etagere_flight_locks_total',
      help: 'Distributed single flight on L1+L2 misses: won (this replica fetched), followed (served what another replica fetched), timeout (waited, then fetched itself), unavailable (no Redis).',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    watchPool: (source) => {
      poolSource = source;
    },
    tokenEvents: new Counter({
      name: 'etagere_token_events_total',
      help: 'Pool token events by token name: dead (401), exhausted (primary limit), secondary (secondary limit).',
      labelNames: ['token', 'event'] as const,
      registers: [registry],
    }),
    tokenSwitchRevalidations: new Counter({
      name: 'etagere_token_switch_revalidations_total',
      help: 'Revalidations sent with another token than the one that stored the entry (it was exhausted, dead or paused).',
      registers: [registry],
    }),
    poolRejections: new Counter({
      name: 'etagere_pool_rejections_total',
      help: 'Requests no pool token could take: exhausted (429 or stale), dead (503 or stale: every token rejected), queue_timeout and queue_full (503 or stale).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    poolQueueWait: new Histogram({
      name: 'etagere_pool_queue_wait_seconds',
      help: 'Time requests waited for a pool token slot (only requests that waited).',
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    consumerRequests: new Counter({
      name: 'etagere_consumer_requests_total',
      help: 'Requests that used the token pool, by consumer name (consumer access control).',
      labelNames: ['consumer'] as const,
      registers: [registry],
    }),
    consumerRejections: new Counter({
      name: 'etagere_consumer_rejections_total',
      help: 'Requests refused with 401 for lack of a known consumer key.',
      registers: [registry],
    }),
    observeRequest,
    countUpstream: (upstream, status) => upstreamRequests.inc({ upstream, status: String(status) }),
    upstreamRequests,
    requests,
    requestDuration,
    cacheOutcomes,
    cacheEvictions: new Counter({
      name: 'etagere_cache_evictions_total',
      help: 'Entries evicted from the in-process cache to stay within its byte bound.',
      registers: [registry],
    }),
  };
}
