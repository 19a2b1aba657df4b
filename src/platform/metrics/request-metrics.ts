/**
 * The per-request metrics (hot path): every answered request goes through `observeRequest`, and
 * every request sent upstream through `countUpstream`. They feed the request, duration, cache
 * outcome, quota-saved and upstream series of specs.ts, and the status page's recent window.
 *
 * Cost matters here (see BENCHMARKS.md, "Per-request metrics as number cells"): the children of
 * a label set are resolved once (LabelSets) and kept, and an observation on the hit path is one
 * label-set lookup (a Map lookup per label value), then additions to plain number cells (cells.ts).
 */
import { savedQuota } from './quota-saved.js';
import type { BuiltMetrics } from './build.js';
import type { CountCell, HistogramCell } from './cells.js';
import { LabelSets } from './label-sets.js';
import type { RecentStats } from './recent.js';

export interface RequestMetrics {
  /** Counts one request sent upstream, by its status (or "error" when none came back), and its time to headers. */
  countUpstream(upstream: string, route: string, status: number | 'error', seconds?: number): void;
  /**
   * Records one answered request (hot path: label children are looked up once and reused).
   * `authorized`: the upstream exchange, if any, carried a credential (its 304s are free).
   */
  observeRequest(
    upstream: string,
    route: string,
    method: string,
    status: number,
    outcome: string | undefined,
    seconds: number,
    authorized: boolean,
  ): void;
}

/** The metrics this module feeds. */
export type RequestSeries = Pick<
  BuiltMetrics,
  'requests' | 'requestDuration' | 'cacheOutcomes' | 'quotaSaved' | 'upstreamRequests' | 'upstreamDuration'
>;

interface PerRequest {
  requests: CountCell;
  duration: HistogramCell;
  outcome: CountCell | undefined;
  saved: CountCell | undefined;
}

export function createRequestMetrics(series: RequestSeries, recent: RecentStats): RequestMetrics {
  // One label-set lookup per request: its request and duration cells, and, for a cached path's
  // request (outcome not ''), its outcome and quota-saved cells.
  const perRequest = new LabelSets((upstream, route, method, status, outcome): PerRequest => ({
    requests: series.requests.cell(upstream, route, method, status),
    duration: series.requestDuration.cell(upstream, route),
    outcome: outcome === '' ? undefined : series.cacheOutcomes.cell(upstream, route, outcome),
    saved: outcome === '' ? undefined : series.quotaSaved.cell(upstream),
  }));
  const upstreamCount = new LabelSets((upstream, route, status) => series.upstreamRequests.labels(upstream, route, status));
  const upstreamTime = new LabelSets((upstream, route) => series.upstreamDuration.labels(upstream, route));

  return {
    countUpstream(upstream, route, status, seconds) {
      upstreamCount.of(upstream, route, String(status)).inc();
      recent.upstream(upstream, status);
      if (seconds !== undefined) upstreamTime.of(upstream, route).observe(seconds);
    },
    observeRequest(upstream, route, method, status, outcome, seconds, authorized) {
      const cells = perRequest.of(upstream, route, method, String(status), outcome ?? '');
      cells.requests.value++;
      cells.duration.observe(seconds);
      const saved = savedQuota(outcome, authorized);
      if (cells.outcome !== undefined) cells.outcome.value++;
      if (saved && cells.saved !== undefined) cells.saved.value++;
      recent.request(saved, outcome === 'hit');
    },
  };
}
