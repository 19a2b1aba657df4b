/**
 * Declares every metric. Other modules receive a `Metrics` object and observe; none declares its own.
 * Each app instance owns a Registry, so several proxies can run in one process (tests, workers).
 */
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface Metrics {
  readonly registry: Registry;
  readonly requests: Counter<'upstream' | 'method' | 'status'>;
  readonly requestDuration: Histogram<'upstream'>;
  readonly upstreamRequests: Counter<'upstream' | 'status'>;
  readonly cacheOutcomes: Counter<'upstream' | 'outcome'>;
  readonly cacheEvictions: Counter;
}

export function createMetrics(opts: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'etagere_' });
  return {
    registry,
    requests: new Counter({
      name: 'etagere_requests_total',
      help: 'Client requests answered, by upstream, method and status code.',
      labelNames: ['upstream', 'method', 'status'],
      registers: [registry],
    }),
    requestDuration: new Histogram({
      name: 'etagere_request_duration_seconds',
      help: 'Time from request arrival to the end of the response.',
      labelNames: ['upstream'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    upstreamRequests: new Counter({
      name: 'etagere_upstream_requests_total',
      help: 'Requests sent upstream, by upstream and status code (or "error").',
      labelNames: ['upstream', 'status'],
      registers: [registry],
    }),
    cacheOutcomes: new Counter({
      name: 'etagere_cache_outcomes_total',
      help: 'Cacheable requests by outcome: hit, revalidated, miss, stale, coalesced, bypass, error.',
      labelNames: ['upstream', 'outcome'],
      registers: [registry],
    }),
    cacheEvictions: new Counter({
      name: 'etagere_cache_evictions_total',
      help: 'Entries evicted from the in-process cache to stay within its byte bound.',
      registers: [registry],
    }),
  };
}
