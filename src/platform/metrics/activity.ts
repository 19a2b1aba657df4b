/**
 * Recent activity, for the status page and `GET /admin/cache/stats`: counts in 10-second buckets
 * over the last 5 minutes (requests, answers that spent no quota, cache hits, and per upstream:
 * requests, errors, the last status), and the busiest paths. Fixed memory; pure apart from the
 * clock it is given.
 */
import { savedQuota } from './quota-windows.js';

export const BUCKET_MS = 10_000;
export const BUCKETS = 30;

/** One 10-second bucket: what requests add to (request-metrics.ts keeps the current one and adds to it directly). */
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

/*
 * The busiest paths, for `GET /admin/cache/stats`: per upstream and client path, the requests
 * answered from the cache (hits), the requests that went upstream, and those that spent quota
 * (quota-windows.ts). Fed once per answered request by the close handler (src/main/handler.ts): a
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
