/**
 * Who spent the upstream quota on what, for GET /admin/quota and the status page: per consumer
 * label (labels.ts; "-" without one), upstream and route template, the requests that went
 * upstream and those of them that were billable (`upstreamSpend`, below), over the last
 * 5 minutes, hour or day. The busiest paths since start, for `GET /admin/cache/stats`, are at the
 * end (`createTopPaths`).
 *
 * Fixed memory: one ring of buckets per window (10 s x 30, 1 min x 60, 1 h x 24), each bucket
 * holding at most MAX_ROWS consumer x route rows; past that a bucket counts the rest in one
 * "other" row. Consumers and routes are bounded already (configured names or at most 50 agent
 * labels at a time; route templates), so the cap only guards the worst case. Per process; pure apart from
 * the clock it is given.
 */
export const QUOTA_WINDOWS = {
  '5m': { bucketMs: 10_000, buckets: 30 },
  '1h': { bucketMs: 60_000, buckets: 60 },
  '24h': { bucketMs: 3_600_000, buckets: 24 },
} as const;

export type QuotaWindow = keyof typeof QUOTA_WINDOWS;
export const DEFAULT_QUOTA_WINDOW: QuotaWindow = '1h';
export const MAX_ROWS = 1000;
/** The consumer of a request without a consumer label. */
export const NO_CONSUMER = '-';
const OTHER = 'other';

export const isQuotaWindow = (value: string): value is QuotaWindow => Object.hasOwn(QUOTA_WINDOWS, value);

export interface QuotaRow {
  consumer: string;
  upstream: string;
  route: string;
  upstream_requests: number;
  billable_requests: number;
}

export interface QuotaReport {
  window: QuotaWindow;
  window_seconds: number;
  bucket_seconds: number;
  totals: { upstream_requests: number; billable_requests: number };
  /** The busiest consumer x route rows by upstream requests, then by billable ones. */
  by_upstream_requests: QuotaRow[];
  by_billable_requests: QuotaRow[];
}

export interface QuotaWindows {
  /** One request that went upstream (`billable`: it spent quota). */
  record(consumer: string, upstream: string, route: string, billable: boolean, now?: number): void;
  /** Every row of a window, summed over its buckets (what a cluster worker hands its primary). */
  rows(window: QuotaWindow, now?: number): QuotaRow[];
  /** The `top` busiest rows of a window, by upstream and by billable requests. */
  report(window: QuotaWindow, top: number, now?: number): QuotaReport;
}

const keyOf = (row: Pick<QuotaRow, 'consumer' | 'upstream' | 'route'>): string => `${row.consumer}\u0000${row.upstream}\u0000${row.route}`;

/** The report of a window from its rows (one list per process: a cluster primary sums its workers'). */
export function quotaReport(window: QuotaWindow, lists: ReadonlyArray<readonly QuotaRow[]>, top: number): QuotaReport {
  const { bucketMs, buckets } = QUOTA_WINDOWS[window];
  const merged = new Map<string, QuotaRow>();
  for (const list of lists)
    for (const row of list) {
      const key = keyOf(row);
      const total = merged.get(key);
      if (total === undefined) merged.set(key, { ...row });
      else {
        total.upstream_requests += row.upstream_requests;
        total.billable_requests += row.billable_requests;
      }
    }
  const rows = [...merged.values()];
  const totals = { upstream_requests: 0, billable_requests: 0 };
  for (const row of rows) {
    totals.upstream_requests += row.upstream_requests;
    totals.billable_requests += row.billable_requests;
  }
  const tie = (left: QuotaRow, right: QuotaRow): number =>
    left.consumer.localeCompare(right.consumer) || left.upstream.localeCompare(right.upstream) || left.route.localeCompare(right.route);
  const byUpstream = [...rows].sort(
    (left, right) =>
      right.upstream_requests - left.upstream_requests || right.billable_requests - left.billable_requests || tie(left, right),
  );
  const byBillable = rows
    .filter((row) => row.billable_requests > 0)
    .sort(
      (left, right) =>
        right.billable_requests - left.billable_requests || right.upstream_requests - left.upstream_requests || tie(left, right),
    );
  return {
    window,
    window_seconds: (bucketMs * buckets) / 1000,
    bucket_seconds: bucketMs / 1000,
    totals,
    by_upstream_requests: byUpstream.slice(0, top),
    by_billable_requests: byBillable.slice(0, top),
  };
}

interface Bucket {
  at: number;
  rows: Map<string, QuotaRow>;
}

function createRing(bucketMs: number, count: number) {
  const ring: Array<Bucket | undefined> = new Array<Bucket | undefined>(count);
  return {
    add(key: string, consumer: string, upstream: string, route: string, billable: boolean, now: number): void {
      const at = Math.floor(now / bucketMs) * bucketMs;
      const slot = Math.floor(at / bucketMs) % count;
      let bucket = ring[slot];
      if (bucket === undefined || bucket.at !== at) ring[slot] = bucket = { at, rows: new Map() };
      let row = bucket.rows.get(key);
      if (row === undefined) {
        const full = bucket.rows.size >= MAX_ROWS - 1;
        const rowKey = full ? OTHER : key;
        row = bucket.rows.get(rowKey);
        if (row === undefined) {
          row = full
            ? { consumer: OTHER, upstream: OTHER, route: OTHER, upstream_requests: 0, billable_requests: 0 }
            : { consumer, upstream, route, upstream_requests: 0, billable_requests: 0 };
          bucket.rows.set(rowKey, row);
        }
      }
      row.upstream_requests++;
      if (billable) row.billable_requests++;
    },
    /** The rows of the buckets within the window ending at `now`, summed. */
    sum(now: number): Map<string, QuotaRow> {
      const from = now - bucketMs * count;
      const out = new Map<string, QuotaRow>();
      for (const bucket of ring) {
        if (bucket === undefined || bucket.at <= from || bucket.at > now) continue;
        for (const [key, row] of bucket.rows) {
          const total = out.get(key);
          if (total === undefined) out.set(key, { ...row });
          else {
            total.upstream_requests += row.upstream_requests;
            total.billable_requests += row.billable_requests;
          }
        }
      }
      return out;
    },
  };
}

export function createQuotaWindows(): QuotaWindows {
  const rings = {
    '5m': createRing(QUOTA_WINDOWS['5m'].bucketMs, QUOTA_WINDOWS['5m'].buckets),
    '1h': createRing(QUOTA_WINDOWS['1h'].bucketMs, QUOTA_WINDOWS['1h'].buckets),
    '24h': createRing(QUOTA_WINDOWS['24h'].bucketMs, QUOTA_WINDOWS['24h'].buckets),
  };
  const rows = (window: QuotaWindow, now = Date.now()): QuotaRow[] => [...rings[window].sum(now).values()];
  return {
    record(consumer, upstream, route, billable, now = Date.now()) {
      const key = keyOf({ consumer, upstream, route });
      rings['5m'].add(key, consumer, upstream, route, billable, now);
      rings['1h'].add(key, consumer, upstream, route, billable, now);
      rings['24h'].add(key, consumer, upstream, route, billable, now);
    },
    rows,
    report: (window, top, now) => quotaReport(window, [rows(window, now)], top),
  };
}

/**
 * What counts as "quota saved": a client request answered without spending upstream quota.
 * Feeds `etagere_quota_saved_total` and the status page's "saved" count. Pure.
 *
 * - `hit`, `stale`, `coalesced`: answered from the cache or from another request's exchange, so
 *   no request of its own went upstream.
 * - `revalidated`: a conditional request went upstream and came back 304. GitHub does not count
 *   a 304 against the rate limit when the request was authorised, so it saves quota only then.
 * - `miss`, `bypass`, `error`, or no cache outcome at all: quota was spent (or nothing was
 *   answered from the cache).
 */
/** What a request's answer was, as metrics and logs count it (Cache-Status names it: http/headers/fields.ts). */
export type CacheOutcome = 'hit' | 'revalidated' | 'miss' | 'stale' | 'coalesced' | 'bypass' | 'error';

const FREE_OUTCOMES: ReadonlySet<string> = new Set<CacheOutcome>(['hit', 'stale', 'coalesced']);

/**
 * Whether a request with this cache outcome (a `CacheOutcome`, or undefined when the request had
 * none) spent no upstream quota. `authorized`: the upstream exchange, if any, carried a
 * credential (the client's own or a pool token).
 */
export function savedQuota(outcome: string | undefined, authorized: boolean): boolean {
  if (outcome === undefined) return false;
  return FREE_OUTCOMES.has(outcome) || (outcome === 'revalidated' && authorized);
}

/** What a request cost upstream: nothing of its own, a free request, or a billable one. */
export type Spend = 'none' | 'free' | 'billable';

/**
 * What an answered request cost upstream, from what it served: it went upstream when an upstream
 * status came back for it (a coalesced answer's status is another request's); that request was
 * free when it was a 304 to an authorised request, billable otherwise. Feeds the per-consumer
 * upstream counter and /admin/quota.
 */
export function upstreamSpend(outcome: string | undefined, upstreamStatus: number | undefined, authorized: boolean): Spend {
  if (upstreamStatus === undefined || outcome === 'coalesced') return 'none';
  return upstreamStatus === 304 && authorized ? 'free' : 'billable';
}

/*
 * The busiest paths, for `GET /admin/cache/stats`: per upstream and client path, the requests
 * answered from the cache (hits), the requests that went upstream, and those that spent quota
 * (`savedQuota`, above). Fed once per answered request by the close handler (src/main/handler.ts): a
 * Map lookup and three additions.
 *
 * Bounded: clients choose paths, so at most MAX_PATHS are counted; past that the less busy half is
 * dropped (amortised over the next MAX_PATHS / 2 new paths), and paths longer than MAX_PATH_CHARS
 * are not counted. Counts are since start (or since the path was last dropped): a ranking, not
 * an account. Per process.
 */
/** One path's counts; a hit adds one to `hits`. */
export interface PathCounts {
  hits: number;
  fetches: number;
  spent: number;
}

/** One path's counts, as /admin/cache/stats shows them. */
export interface PathRow {
  upstream: string;
  path: string;
  hits: number;
  upstream_requests: number;
  quota_spent: number;
}

export interface TopPaths {
  record(upstream: string, path: string, hit: boolean, upstreamCall: boolean, spent: boolean): void;
  /** Records one answered request by its cache outcome (`authorized`: its upstream exchange carried a credential). */
  served(upstream: string, path: string, outcome: string | undefined, authorized: boolean): void;
  /**
   * One path's counts, made when missing, to keep and add hits to while `generation` stays the
   * same (a stored form's hits: src/main/recorder.ts); undefined for a path too long to count.
   */
  countsOf(upstream: string, path: string): PathCounts | undefined;
  /** Changes whenever counts made before are no longer the ones counted (the busier half kept). */
  readonly generation: number;
  /** The `count` busiest paths by hits, or by quota spent (then upstream requests). */
  top(by: 'hits' | 'spent', count: number): PathRow[];
  readonly size: number;
}

const MAX_PATHS = 10_000;
const MAX_PATH_CHARS = 512;

export function createTopPaths(maxPaths = MAX_PATHS): TopPaths {
  const byUpstream = new Map<string, Map<string, PathCounts>>();
  let size = 0;

  const rows = (): PathRow[] => {
    const out: PathRow[] = [];
    for (const [upstream, paths] of byUpstream)
      for (const [path, counts] of paths)
        out.push({ upstream, path, hits: counts.hits, upstream_requests: counts.fetches, quota_spent: counts.spent });
    return out;
  };

  /** Keeps the busier half. */
  const prune = (): void => {
    self.generation++;
    const all = rows().sort((left, right) => right.hits + right.upstream_requests - (left.hits + left.upstream_requests));
    byUpstream.clear();
    size = 0;
    for (const row of all.slice(0, Math.floor(maxPaths / 2))) {
      let paths = byUpstream.get(row.upstream);
      if (paths === undefined) byUpstream.set(row.upstream, (paths = new Map()));
      paths.set(row.path, { hits: row.hits, fetches: row.upstream_requests, spent: row.quota_spent });
      size++;
    }
  };

  const countsOf = (upstream: string, path: string): PathCounts | undefined => {
    if (path.length > MAX_PATH_CHARS) return undefined;
    let paths = byUpstream.get(upstream);
    if (paths === undefined) byUpstream.set(upstream, (paths = new Map()));
    let counts = paths.get(path);
    if (counts === undefined) {
      if (size >= maxPaths) {
        prune();
        return countsOf(upstream, path);
      }
      paths.set(path, (counts = { hits: 0, fetches: 0, spent: 0 }));
      size++;
    }
    return counts;
  };

  // `generation` is a field, not a getter: a hit reads it without a call into this module.
  const self: { -readonly [K in keyof TopPaths]: TopPaths[K] } = {
    countsOf,
    generation: 0,
    record(upstream, path, hit, upstreamCall, spent) {
      if (!hit && !upstreamCall) return;
      const counts = countsOf(upstream, path);
      if (counts === undefined) return;
      if (hit) counts.hits++;
      if (upstreamCall) counts.fetches++;
      if (spent) counts.spent++;
    },
    served(upstream, path, outcome, authorized) {
      const fetched = outcome === 'miss' || outcome === 'revalidated' || outcome === 'bypass';
      this.record(upstream, path, outcome === 'hit' || outcome === 'stale', fetched, fetched && !savedQuota(outcome, authorized));
    },
    top(by, count) {
      const order =
        by === 'hits'
          ? (left: PathRow, right: PathRow) => right.hits - left.hits
          : (left: PathRow, right: PathRow) => right.quota_spent - left.quota_spent || right.upstream_requests - left.upstream_requests;
      return rows()
        .filter((row) => (by === 'hits' ? row.hits > 0 : row.upstream_requests > 0))
        .sort(order)
        .slice(0, count);
    },
    get size() {
      return size;
    },
  };
  return self;
}
