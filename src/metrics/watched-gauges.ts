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
  }>;
  queueLength(): number;
}

/** What the cache gauges read at scrape time. */
export interface CacheGaugeSource {
  l1Entries(): number;
  l1Bytes(): number;
  /** Callers currently waiting on another caller's upstream exchange. */
  waiters(): number;
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

export const WATCHED_GAUGES = {
  tokenRemaining: (gauge, sources) => perToken(gauge, sources, (t) => t.remaining),
  tokenLimit: (gauge, sources) => perToken(gauge, sources, (t) => t.limit),
  tokenReset: (gauge, sources) => perToken(gauge, sources, (t) => t.reset),
  tokenInflight: (gauge, sources) => perToken(gauge, sources, (t) => t.in_flight),
  tokenState: (gauge, sources) => {
    gauge.reset();
    for (const token of sources.pool?.tokens() ?? []) {
      for (const state of TOKEN_STATES) gauge.set({ token: token.name, state }, token.state === state ? 1 : 0);
    }
  },
  poolQueueLength: (gauge, sources) => gauge.set(sources.pool?.queueLength() ?? 0),
  cacheEntries: (gauge, sources) => gauge.set({ tier: 'l1' }, sources.cache?.l1Entries() ?? 0),
  cacheBytes: (gauge, sources) => gauge.set({ tier: 'l1' }, sources.cache?.l1Bytes() ?? 0),
  coalescedWaiters: (gauge, sources) => gauge.set(sources.cache?.waiters() ?? 0),
} satisfies { [K in WatchedGauge]: (gauge: Gauge<LabelName<K>>, sources: GaugeSources) => void };

/** The gauges read from a watched source (the spec keys WATCHED_GAUGES covers). */
export type WatchedGauge =
  | 'tokenRemaining'
  | 'tokenLimit'
  | 'tokenReset'
  | 'tokenInflight'
  | 'tokenState'
  | 'poolQueueLength'
  | 'cacheEntries'
  | 'cacheBytes'
  | 'coalescedWaiters';
