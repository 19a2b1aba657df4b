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
  return {
    registry,
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
