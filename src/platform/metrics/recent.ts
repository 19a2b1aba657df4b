/**
 * Recent activity for the status page: counts in 10-second buckets over the last 5 minutes
 * (requests, answers that spent no quota, cache hits, and per upstream: requests, errors, the
 * last status). Fixed memory; pure apart from the clock it is given.
 */
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
