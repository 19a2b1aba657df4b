/**
 * The per-request metrics (hot path): every answered request goes through `observeRequest` (or,
 * with its cell resolved once, `observeCell`), and every request sent upstream through
 * `countUpstream`. They feed the request, duration, cache outcome, quota-saved and upstream
 * series of specs.ts, and the status page's recent window (`createRecentStats`, at the end).
 *
 * Cost matters here (see BENCHMARKS.md): an answered request is one cell of one table, by
 * upstream, route, method, status, cache outcome and whether it was authorised, and recording it
 * is one bucket increment and one addition. etagere_requests_total, etagere_request_duration_seconds,
 * etagere_cache_outcomes_total and etagere_quota_saved_total are views of that table, summed by
 * their own labels when they are scraped (cells.ts `derive`): the same text as four sets of cells.
 */
import { savedQuota } from './quota-windows.js';
import type { BuiltMetrics } from './build.js';
import { LabelSets } from './labels.js';

/** One label set of answered requests: its counts per duration bucket (the last above every bound) and their sum. */
export interface RequestCell {
  readonly upstream: string;
  readonly route: string;
  readonly method: string;
  readonly status: string;
  /** The cache outcome, or '' for a request without one. */
  readonly outcome: string;
  /** It spent no upstream quota (quota-windows.ts). */
  readonly saved: boolean;
  readonly hit: boolean;
  readonly counts: number[];
  sum: number;
}

export interface RequestMetrics {
  /** Counts one request sent upstream, by its status (or "error" when none came back), and its time to headers. */
  countUpstream(upstream: string, route: string, status: number | 'error', seconds?: number): void;
  /**
   * Records one answered request. `authorized`: the upstream exchange, if any, carried a
   * credential (its 304s are free).
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
  /** The cell of one label set, to keep and feed with `observeCell` (a stored form's hits: src/main/recorder.ts). */
  requestCell(
    upstream: string,
    route: string,
    method: string,
    status: number,
    outcome: string | undefined,
    authorized: boolean,
  ): RequestCell;
  /** Records one answered request in its cell: one bucket increment. */
  observeCell(cell: RequestCell, seconds: number): void;
}

/** The metrics this module feeds. */
export type RequestSeries = Pick<
  BuiltMetrics,
  'requests' | 'requestDuration' | 'cacheOutcomes' | 'quotaSaved' | 'upstreamRequests' | 'upstreamDuration'
>;

/** A view's series: the table's cells grouped by some of their labels (`key`; undefined: not in the view), folded by `add`. */
function grouped<V>(
  cells: Iterable<RequestCell>,
  key: (cell: RequestCell) => string[] | undefined,
  add: (into: V | undefined, cell: RequestCell) => V,
): Array<[string[], V]> {
  const out = new Map<string, [string[], V]>();
  for (const cell of cells) {
    const labels = key(cell);
    if (labels === undefined) continue;
    const id = labels.join('\0');
    const known = out.get(id);
    if (known === undefined) out.set(id, [labels, add(undefined, cell)]);
    else known[1] = add(known[1], cell);
  }
  return [...out.values()];
}

const countOf = (cell: RequestCell): number => cell.counts.reduce((total, count) => total + count, 0);
const addCount = (into: number | undefined, cell: RequestCell): number => (into ?? 0) + countOf(cell);
const addSaved = (into: number | undefined, cell: RequestCell): number => (into ?? 0) + (cell.saved ? countOf(cell) : 0);

/** Wires the four request metrics to the table as views of it. */
function deriveFrom(series: RequestSeries, table: LabelSets<RequestCell>): void {
  const slots = series.requestDuration.bucketBounds().length + 1;
  series.requests.derive(() => grouped(table.values(), (c) => [c.upstream, c.route, c.method, c.status], addCount));
  series.cacheOutcomes.derive(() =>
    grouped(table.values(), (c) => (c.outcome === '' ? undefined : [c.upstream, c.route, c.outcome]), addCount),
  );
  series.quotaSaved.derive(() => grouped(table.values(), (c) => (c.outcome === '' ? undefined : [c.upstream]), addSaved));
  const addDuration = (into: { counts: number[]; sum: number } | undefined, cell: RequestCell) => {
    const acc = into ?? { counts: new Array<number>(slots).fill(0), sum: 0 };
    cell.counts.forEach((count, slot) => (acc.counts[slot]! += count));
    acc.sum += cell.sum;
    return acc;
  };
  series.requestDuration.derive(() =>
    grouped(table.values(), (c) => [c.upstream, c.route], addDuration).map(([labels, { counts, sum }]) => [labels, counts, sum] as const),
  );
}

export function createRequestMetrics(series: RequestSeries, recent: RecentStats): RequestMetrics {
  const bounds = series.requestDuration.bucketBounds();
  const table = new LabelSets((upstream, route, method, status, outcome, authorized): RequestCell => ({
    upstream,
    route,
    method,
    status,
    outcome,
    saved: savedQuota(outcome === '' ? undefined : outcome, authorized === 'y'),
    hit: outcome === 'hit',
    counts: new Array<number>(bounds.length + 1).fill(0),
    sum: 0,
  }));
  deriveFrom(series, table);
  const upstreamCount = new LabelSets((upstream, route, status) => series.upstreamRequests.labels(upstream, route, status));
  const upstreamTime = new LabelSets((upstream, route) => series.upstreamDuration.labels(upstream, route));

  // The status page's current 10-second bucket, kept: a request adds to it without a lookup.
  let bucket: Bucket = recent.bucketOf(Date.now());
  const observeCell = (cell: RequestCell, seconds: number): void => {
    let slot = 0;
    while (slot < bounds.length && seconds > bounds[slot]!) slot++;
    cell.counts[slot]!++;
    cell.sum += seconds;
    const now = Date.now();
    if (now - bucket.at >= BUCKET_MS || now < bucket.at) bucket = recent.bucketOf(now);
    bucket.requests++;
    if (cell.saved) bucket.saved++;
    if (cell.hit) bucket.hits++;
  };
  const requestCell: RequestMetrics['requestCell'] = (upstream, route, method, status, outcome, authorized) =>
    table.of(upstream, route, method, String(status), outcome ?? '', authorized ? 'y' : 'n');

  return {
    countUpstream(upstream, route, status, seconds) {
      upstreamCount.of(upstream, route, String(status)).inc();
      recent.upstream(upstream, status);
      if (seconds !== undefined) upstreamTime.of(upstream, route).observe(seconds);
    },
    observeRequest(upstream, route, method, status, outcome, seconds, authorized) {
      observeCell(requestCell(upstream, route, method, status, outcome, authorized), seconds);
    },
    requestCell,
    observeCell,
  };
}

/*
 * Recent activity for the status page: counts in 10-second buckets over the last 5 minutes
 * (requests, answers that spent no quota, cache hits, and per upstream: requests, errors, the
 * last status). Fixed memory; pure apart from the clock it is given.
 */
export const BUCKET_MS = 10_000;
export const BUCKETS = 30;

/** One 10-second bucket: what requests add to (`observeRequest` keeps the current one and adds to it directly). */
export interface Bucket {
  readonly at: number;
  requests: number;
  saved: number;
  hits: number;
  readonly upstream: Map<string, { requests: number; errors: number }>;
}

export interface UpstreamHealth {
  name: string;
  requests: number;
  errors: number;
  lastStatus: number | 'error' | null;
  lastAt: number | null;
}

export interface RecentSummary {
  windowSeconds: number;
  requests: number;
  saved: number;
  hits: number;
  hitRatio: number | null;
  upstreams: UpstreamHealth[];
}

export interface RecentStats {
  request(saved: boolean, hit: boolean, now?: number): void;
  /** The bucket of `now` (it covers BUCKET_MS from its `at`). */
  bucketOf(now: number): Bucket;
  upstream(name: string, status: number | 'error', now?: number): void;
  summary(now?: number): RecentSummary;
}

export function createRecentStats(): RecentStats {
  const ring: Bucket[] = [];
  const last = new Map<string, { status: number | 'error'; at: number }>();
  const bucket = (now: number): Bucket => {
    const at = Math.floor(now / BUCKET_MS) * BUCKET_MS;
    const slot = Math.floor(at / BUCKET_MS) % BUCKETS;
    let current = ring[slot];
    if (current === undefined || current.at !== at) {
      current = { at, requests: 0, saved: 0, hits: 0, upstream: new Map() };
      ring[slot] = current;
    }
    return current;
  };
  return {
    bucketOf: bucket,
    request(saved, hit, now = Date.now()) {
      const current = bucket(now);
      current.requests++;
      if (saved) current.saved++;
      if (hit) current.hits++;
    },
    upstream(name, status, now = Date.now()) {
      const current = bucket(now);
      let counts = current.upstream.get(name);
      if (counts === undefined) {
        counts = { requests: 0, errors: 0 };
        current.upstream.set(name, counts);
      }
      counts.requests++;
      if (status === 'error' || status >= 500) counts.errors++;
      last.set(name, { status, at: now });
    },
    summary(now = Date.now()) {
      const from = now - BUCKET_MS * BUCKETS;
      let requests = 0;
      let saved = 0;
      let hits = 0;
      const ups = new Map<string, { requests: number; errors: number }>();
      for (const slot of ring) {
        if (slot === undefined || slot.at < from) continue;
        requests += slot.requests;
        saved += slot.saved;
        hits += slot.hits;
        for (const [name, counts] of slot.upstream) {
          const total = ups.get(name) ?? { requests: 0, errors: 0 };
          total.requests += counts.requests;
          total.errors += counts.errors;
          ups.set(name, total);
        }
      }
      const names = new Set([...ups.keys(), ...last.keys()]);
      return {
        windowSeconds: (BUCKET_MS * BUCKETS) / 1000,
        requests,
        saved,
        hits,
        hitRatio: requests === 0 ? null : hits / requests,
        upstreams: [...names].sort().map((name) => ({
          name,
          requests: ups.get(name)?.requests ?? 0,
          errors: ups.get(name)?.errors ?? 0,
          lastStatus: last.get(name)?.status ?? null,
          lastAt: last.get(name)?.at ?? null,
        })),
      };
    },
  };
}
