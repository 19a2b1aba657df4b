/**
 * Gauges read at scrape time from parts built after the metrics. The metrics exist first (every
 * module receives them); the token pool and the cache are built later and register themselves
 * with `Metrics.watchPool` / `Metrics.watchCache`, which fill in a `GaugeSources` slot. Each
 * gauge below reads its slot when /metrics is scraped: before a source registers, the pool and
 * token gauges export nothing or 0 and the cache gauges export 0.
 */
import type { Gauge } from 'prom-client';
import type { LabelName } from './specs.js';

/** What the token gauges read at scrape time (names only, never values). */
export interface PoolGaugeSource {
  tokens(): ReadonlyArray<{
    name: string;
    state: string;
    limit: number | null;
    remaining: number | null;
    reset: number | null;
    in_flight: number;
    /** Each rate-limit resource whose numbers are known (the fields above are core's). */
    resources?: Readonly<Partial<Record<string, { limit: number; remaining: number; reset: number }>>>;
  }>;
  queueLength(): number;
}

/** What the cache gauges read at scrape time. */
export interface CacheGaugeSource {
  l1Entries(): number;
  l1Bytes(): number;
  /** Callers currently waiting on another caller's upstream exchange. */
  waiters(): number;
  /** Bytes held beside L1 by tier: the memos (src/platform/bytes.ts), the rewritten and decoded bodies, the shared header fields. */
  memoBytes?(): {
    partition: number;
    routes: number;
    tokens?: number;
    rewrittenBodies: number;
    decodedBodies?: number;
    l2Memo?: number;
    sharedHeaders?: number;
    logMemo?: number;
    credentialMemo?: number;
    oidcMemo?: number;
  };
  /** Body bytes of the L1 entries: as stored (gzip) and decoded. */
  l1BodyBytes?(): { stored: number; decoded: number };
}

/** The sources registered so far (filled in by watchPool / watchCache). */
export interface GaugeSources {
  pool?: PoolGaugeSource;
  cache?: CacheGaugeSource;
}

type TokenSnapshot = ReturnType<PoolGaugeSource['tokens']>[number];

const TOKEN_STATES = ['ok', 'exhausted', 'paused', 'dead', 'unknown'] as const;

/** One series per token, for the tokens that have a value (limit, remaining and reset may be unknown). */
function perToken(gauge: Gauge<'token'>, sources: GaugeSources, read: (token: TokenSnapshot) => number | null): void {
  gauge.reset();
  for (const token of sources.pool?.tokens() ?? []) {
    const value = read(token);
    if (value !== null) gauge.set({ token: token.name }, value);
  }
}

/** One series per token and rate-limit resource it knows (resource names come from a fixed list, never the upstream). */
function perResource(gauge: Gauge<'token' | 'resource'>, sources: GaugeSources, field: 'limit' | 'remaining' | 'reset'): void {
  gauge.reset();
  for (const token of sources.pool?.tokens() ?? []) {
    for (const [resource, numbers] of Object.entries(token.resources ?? {})) {
      if (numbers !== undefined) gauge.set({ token: token.name, resource }, numbers[field]);
    }
  }
}

export const WATCHED_GAUGES = {
  tokenRemaining: (gauge, sources) => perToken(gauge, sources, (t) => t.remaining),
  tokenLimit: (gauge, sources) => perToken(gauge, sources, (t) => t.limit),
  tokenReset: (gauge, sources) => perToken(gauge, sources, (t) => t.reset),
  tokenInflight: (gauge, sources) => perToken(gauge, sources, (t) => t.in_flight),
  tokenResourceRemaining: (gauge, sources) => perResource(gauge, sources, 'remaining'),
  tokenResourceLimit: (gauge, sources) => perResource(gauge, sources, 'limit'),
  tokenResourceReset: (gauge, sources) => perResource(gauge, sources, 'reset'),
  tokenState: (gauge, sources) => {
    gauge.reset();
    for (const token of sources.pool?.tokens() ?? []) {
      for (const state of TOKEN_STATES) gauge.set({ token: token.name, state }, token.state === state ? 1 : 0);
    }
  },
  poolQueueLength: (gauge, sources) => gauge.set(sources.pool?.queueLength() ?? 0),
  cacheEntries: (gauge, sources) => gauge.set({ tier: 'l1' }, sources.cache?.l1Entries() ?? 0),
  cacheBytes: (gauge, sources) => {
    gauge.set({ tier: 'l1' }, sources.cache?.l1Bytes() ?? 0);
    const memos = sources.cache?.memoBytes?.();
    gauge.set({ tier: 'partition_memo' }, memos?.partition ?? 0);
    gauge.set({ tier: 'route_memo' }, memos?.routes ?? 0);
    gauge.set({ tier: 'token_memo' }, memos?.tokens ?? 0);
    gauge.set({ tier: 'rewritten_bodies' }, memos?.rewrittenBodies ?? 0);
    gauge.set({ tier: 'decoded_bodies' }, memos?.decodedBodies ?? 0);
    gauge.set({ tier: 'l2_memo' }, memos?.l2Memo ?? 0);
    gauge.set({ tier: 'shared_headers' }, memos?.sharedHeaders ?? 0);
    gauge.set({ tier: 'log_memo' }, memos?.logMemo ?? 0);
    gauge.set({ tier: 'credential_memo' }, memos?.credentialMemo ?? 0);
    gauge.set({ tier: 'oidc_memo' }, memos?.oidcMemo ?? 0);
  },
  cacheBodyBytes: (gauge, sources) => {
    const bodies = sources.cache?.l1BodyBytes?.() ?? { stored: 0, decoded: 0 };
    gauge.set({ form: 'stored' }, bodies.stored);
    gauge.set({ form: 'decoded' }, bodies.decoded);
  },
  cacheCompressionRatio: (gauge, sources) => {
    const bodies = sources.cache?.l1BodyBytes?.() ?? { stored: 0, decoded: 0 };
    gauge.set(bodies.stored === 0 ? 1 : bodies.decoded / bodies.stored);
  },
  coalescedWaiters: (gauge, sources) => gauge.set(sources.cache?.waiters() ?? 0),
} satisfies { [K in WatchedGauge]: (gauge: Gauge<LabelName<K>>, sources: GaugeSources) => void };

/** The gauges read from a watched source (the spec keys WATCHED_GAUGES covers). */
export type WatchedGauge =
  | 'tokenRemaining'
  | 'tokenLimit'
  | 'tokenReset'
  | 'tokenInflight'
  | 'tokenResourceRemaining'
  | 'tokenResourceLimit'
  | 'tokenResourceReset'
  | 'tokenState'
  | 'poolQueueLength'
  | 'cacheEntries'
  | 'cacheBytes'
  | 'cacheBodyBytes'
  | 'cacheCompressionRatio'
  | 'coalescedWaiters';
