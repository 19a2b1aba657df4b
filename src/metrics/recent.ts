/**
 * Recent activity for the status page: counts in 10-second buckets over the last 5 minutes
 * (requests, answers that spent no quota, cache hits, and per upstream: requests, errors, the
 * last status). Fixed memory; pure apart from the clock it is given.
 */
export const BUCKET_MS = 10_000;
export const BUCKETS = 30;

interface Bucket {
  at: number;
  requests: number;
  saved: number;
  hits: number;
  upstream: Map<string, { requests: number; errors: number }>;
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
  upstream(name: string, status: number | 'error', now?: number): void;
  summary(now?: number): RecentSummary;
}

export function createRecentStats(): RecentStats {
  const ring: Bucket[] = [];
  const last = new Map<string, { status: number | 'error'; at: number }>();
  const bucket = (now: number): Bucket => {
    const at = Math.floor(now / BUCKET_MS) * BUCKET_MS;
    const i = Math.floor(at / BUCKET_MS) % BUCKETS;
    let b = ring[i];
    if (b === undefined || b.at !== at) {
      b = { at, requests: 0, saved: 0, hits: 0, upstream: new Map() };
      ring[i] = b;
    }
    return b;
  };
  return {
    request(saved, hit, now = Date.now()) {
      const b = bucket(now);
      b.requests++;
      if (saved) b.saved++;
      if (hit) b.hits++;
    },
    upstream(name, status, now = Date.now()) {
      const b = bucket(now);
      let u = b.upstream.get(name);
      if (u === undefined) {
        u = { requests: 0, errors: 0 };
        b.upstream.set(name, u);
      }
      u.requests++;
      if (status === 'error' || status >= 500) u.errors++;
      last.set(name, { status, at: now });
    },
    summary(now = Date.now()) {
      const from = now - BUCKET_MS * BUCKETS;
      let requests = 0;
      let saved = 0;
      let hits = 0;
      const ups = new Map<string, { requests: number; errors: number }>();
      for (const b of ring) {
        if (b === undefined || b.at < from) continue;
        requests += b.requests;
        saved += b.saved;
        hits += b.hits;
        for (const [name, u] of b.upstream) {
          const t = ups.get(name) ?? { requests: 0, errors: 0 };
          t.requests += u.requests;
          t.errors += u.errors;
          ups.set(name, t);
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
