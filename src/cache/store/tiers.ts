/**
 * The cache's storage, as the request path sees it: L1 (in-process LRU, bounded in bytes) in front
 * of L2 (Redis, shared by every replica, optional), the invalidation bus that keeps other
 * replicas' L1 copies honest, and the path invalidations of RFC 9111 section 4.4.
 *
 *   fromL1   synchronous: the hit path touches nothing else
 *   lookup   L2 when L1 had nothing (every candidate key), promoting what it finds into L1
 *            (non-equivalent pool tokens: a hit probes one token's key first, token-memo.ts)
 *   usable   the entry if this request may use it (Vary matches, path not invalidated since, its
 *            credential not rejected by the upstream since)
 *   apply    stores or drops what an upstream exchange produced, in L1 and L2, and tells the others
 *   markStale  marks path scopes stale (webhook deliveries, purges) on every replica (marking.ts)
 */
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { RedisConnection } from '../../platform/redis/connection.js';
import { createInvalidationBus, type InvalidationBus, type InvalidationHandlers } from './invalidation-bus.js';
import type { CacheResult, Rejection } from '../rules/classify.js';
import { fieldValue, type CacheEntry } from '../rules/entry.js';
import { createFlightLock, type FlightLock } from './flight-lock.js';
import { pathScope, varyMatches } from '../rules/key.js';
import { createMarking, DEFAULT_MARK_SETTINGS, type Marking } from './marking.js';
import { scopeId, type PathScope } from '../rules/path-scope.js';
import { createSharedMarks, type SharedMarks } from './shared-marks.js';
import type { MarkSource, StaleMarksSettings } from '../rules/stale-marks.js';
import { createDisabledStore, createMemoryStore, type Beside, type MemoryStore } from './memory-store.js';
import { ownedCopy } from '../../platform/owned-bytes.js';
import { retentionSeconds } from '../rules/policy.js';
import { createRedisStore, type RedisStore } from './redis-store.js';
import { createHeaderTable, type HeaderTable } from './header-intern.js';
import { createRejectionMemo, rememberBounded } from './rejections.js';
import type { CacheRequest } from '../rules/request.js';
import { createTokenMemo, type TokenMemo } from './token-memo.js';

/** Whether the request selects the entry by its Vary (values in normal form under `rfc9111`). */
function varyUsable(req: CacheRequest, entry: CacheEntry): boolean {
  if (entry.vary === null) return true;
  return varyMatches(entry.vary, req.header, req.policy.kind === 'rfc9111', () => fieldValue(entry.headers, 'content-language'));
}

export interface TierSettings {
  l1: boolean;
  maxBytes: number;
  maxEntryBytes: number;
  /** Redis lock time for the distributed single flight (redis.lock_ms). */
  lockMs: number;
  /** How long stale marks are remembered, and how many (marking.ts); DEFAULT_MARK_SETTINGS when unset. */
  marks?: StaleMarksSettings;
  /** The memo beside L1 that counts against maxBytes (the decoded bodies): L1 gives way to it (memory-store.ts). */
  besideL1?: Beside;
  /** The header fields the entries share (header-intern.ts); a table of the tiers' own when unset. */
  headerTable?: HeaderTable;
}

/** What an L2 lookup found; `answered` is false when Redis did not answer (down, breaker open, too slow). */
export interface Found {
  entry: CacheEntry | undefined;
  answered: boolean;
}

/** The Redis side: L2, its single-flight lock, and the bus to the other replicas. */
export interface SharedTier {
  readonly l2: RedisStore;
  readonly lock: FlightLock;
  readonly bus: InvalidationBus;
  /** Stale marks kept for replicas that start later. */
  readonly marks: SharedMarks;
  /** Writes an entry to L2, then tells the other replicas (their older L1 copies drop). */
  store(key: string, entry: CacheEntry, ttlMs: number): void;
  drop(key: string): void;
  /** Resolves once a pending write of `key` is done. */
  written(key: string): Promise<void> | undefined;
}

export interface Tiers {
  readonly l1: MemoryStore;
  /** The header fields its entries share: classify stores new entries' fields through it (`headerTable.pair`). */
  readonly headerTable: HeaderTable;
  readonly shared: SharedTier | undefined;
  fromL1(req: CacheRequest): CacheEntry | undefined;
  lookup(req: CacheRequest): Promise<Found>;
  usable(req: CacheRequest, entry: CacheEntry | undefined): CacheEntry | undefined;
  /**
   * `sentAt`: when the exchange's request went upstream (a stale mark made since then covers its
   * answer). `req`: the request whose exchange it was (its stored token becomes the one a hit looks at first).
   */
  apply(result: CacheResult, sentAt?: number, req?: CacheRequest): void;
  /** Bytes the flight -> token memo of non-equivalent pools holds (token-memo.ts). */
  readonly tokenMemoBytes: number;
  /** Puts an entry read from L2 into L1 for what is left of its retention; returns it as kept (marked stale when a mark covers it). */
  promote(key: string, entry: CacheEntry): CacheEntry;
  /** Resolves once a pending L2 write of `key` is done (a flight lock is released only then). */
  written(key: string): Promise<void>;
  /** Forgets every stored response for a path (after a successful unsafe method), on every replica. */
  invalidatePath(upstream: string, pathname: string): void;
  /** Marks every entry in these scopes stale, on every replica; returns the entries in them in this replica's L1. */
  markStale(scopes: readonly PathScope[], source: MarkSource): number;
  /** The path index of L1 and the marks (admin inspection). */
  readonly marking: Marking;
  /** Reads the marks other replicas made before this one started (Redis); never throws. */
  loadMarks(): Promise<void>;
  close(): void;
}

/** At most this many invalidated path scopes are remembered (oldest forgotten first). */
const MAX_INVALIDATIONS = 10_000;

export function createTiers(settings: TierSettings, metrics: Metrics, logger: Logger, redis: RedisConnection | undefined): Tiers {
  const markSettings = settings.marks ?? DEFAULT_MARK_SETTINGS;
  const headerTable = settings.headerTable ?? createHeaderTable();
  const marking = createMarking(markSettings, metrics, () => l1);
  const l1 = !settings.l1
    ? createDisabledStore()
    : createMemoryStore({
        maxBytes: settings.maxBytes,
        maxEntryBytes: settings.maxEntryBytes,
        ...(settings.besideL1 === undefined ? {} : { beside: settings.besideL1 }),
        onEvict: () => metrics.cacheEvictions.inc(),
        onKeys: { added: (key) => marking.index.add(key), removed: (key) => marking.index.remove(key) },
      });
  /** Path scope -> when it was invalidated: entries stored before then are not used. Likewise what the upstream rejected. */
  const invalidations = new Map<string, number>();
  const rejections = createRejectionMemo();
  const markInvalidated = (scope: string, at: number): void => {
    if (rejections.isRejection(scope)) rejections.remember(scope, at);
    else rememberBounded(invalidations, scope, at, MAX_INVALIDATIONS);
  };

  /** Remembers what the upstream rejected, here and on every replica. */
  const markRejected = (rejected: Rejection): void => {
    const at = Date.now();
    for (const scope of rejections.scopesOf(rejected)) {
      rejections.remember(scope, at);
      shared?.bus.path(scope, at);
    }
  };

  /** Notices from other replicas (redis/invalidation-bus.ts). */
  const remote: InvalidationHandlers = {
    entry(key, storedAt) {
      const entry = l1.get(key);
      if (entry !== undefined && entry.storedAt < storedAt) l1.delete(key);
    },
    dropped(key) {
      l1.delete(key);
    },
    path: markInvalidated,
    marked: (ids, at, source) => marking.mark(ids, { at, source: source === 'purge' ? 'purge' : 'webhook', observed: false }),
  };

  /** Non-equivalent pool tokens: per flight key, the token whose entry is the newest (token-memo.ts). */
  const tokenMemo = createTokenMemo();
  const shared =
    redis === undefined ? undefined : createSharedTier(redis, { ...settings, marks: markSettings, headerTable }, metrics, logger, remote);

  const store = (key: string, fetched: CacheEntry, sentAt: number | undefined): void => {
    const entry = marking.checked(key, fetched, Date.now(), sentAt);
    const ttlMs = retentionSeconds(entry) * 1000;
    l1.set(key, entry, ttlMs);
    shared?.store(key, entry, ttlMs);
  };

  const drop = (key: string): void => {
    l1.delete(key);
    shared?.drop(key);
  };

  /** The body is copied out of the Redis reply buffer so the L1 copy pins nothing larger than itself. */
  const promote = (key: string, found: CacheEntry): CacheEntry => {
    const now = Date.now();
    const entry = marking.checked(key, found, now);
    if (!settings.l1) return entry;
    const ttlMs = entry.storedAt + retentionSeconds(entry) * 1000 - now;
    if (ttlMs > 0) l1.set(key, { ...entry, body: ownedCopy(entry.body) }, ttlMs);
    return entry;
  };

  const fromL1 = (req: CacheRequest): CacheEntry | undefined => {
    if (!req.keys.perToken) return l1.get(req.keys.flight);
    if (!settings.l1) return undefined;
    // Non-equivalent pool tokens: the memoized token's entry, else every member's (token-memo.ts).
    return tokenMemo.fromL1(req, l1, (entry) => usable(req, entry) !== undefined, Date.now());
  };

  const usable = (req: CacheRequest, entry: CacheEntry | undefined): CacheEntry | undefined => {
    if (entry === undefined || !varyUsable(req, entry)) return undefined;
    if (rejections.size > 0 && rejections.rejectedSince(req.keys.flight, req.keys.partition, entry.storedAt)) return undefined;
    if (invalidations.size === 0) return entry;
    const at = invalidations.get(pathScope(req.upstream, req.pathname));
    return at !== undefined && entry.storedAt <= at ? undefined : entry;
  };

  return {
    l1,
    shared,
    fromL1,
    lookup: (req) => lookupL2(shared, req, promote, tokenMemo, logger),
    usable,
    promote,
    apply(result, sentAt, req) {
      if (result.kind !== 'entry') return;
      if (result.rejected !== undefined) markRejected(result.rejected);
      const answered = result.transient ? undefined : (result.storeKey ?? result.dropKey);
      if (answered !== undefined) marking.settled(answered, result.fwdStatus !== 304, Date.now());
      if (result.storeKey !== undefined) {
        store(result.storeKey, result.entry, sentAt);
        if (req?.keys.perToken === true && result.token !== undefined) tokenMemo.remember(req.keys, result.token);
      } else if (result.dropKey !== undefined) drop(result.dropKey);
    },
    headerTable,
    get tokenMemoBytes() {
      return tokenMemo.bytes;
    },
    written: (key) => shared?.written(key) ?? Promise.resolve(),
    invalidatePath(upstream, pathname) {
      const at = Date.now();
      const scope = pathScope(upstream, pathname);
      markInvalidated(scope, at);
      shared?.bus.path(scope, at);
    },
    marking,
    ...markingMethods(marking, shared),
    close() {
      shared?.bus.close();
    },
  };
}

/** Every candidate key of a request in L2, each hit promoted into L1; the newest is the answer. */
async function lookupL2(
  shared: SharedTier | undefined,
  req: CacheRequest,
  promote: (key: string, entry: CacheEntry) => CacheEntry,
  tokenMemo: TokenMemo,
  logger: Logger,
): Promise<Found> {
  if (shared === undefined) return { entry: undefined, answered: true };
  const { l2 } = shared;
  const { candidates, candidateTokens } = req.keys;
  try {
    if (candidates.length === 1) {
      // The common case (one key): no arrays, no Promise.all.
      const result = await l2.lookup(candidates[0]!);
      const entry = result.kind === 'hit' ? promote(candidates[0]!, result.entry) : undefined;
      if (entry !== undefined && candidateTokens[0] !== undefined) tokenMemo.remember(req.keys, candidateTokens[0]);
      return { entry, answered: result.kind !== 'skipped' };
    }
    // Issued in one tick: ioredis' auto-pipelining sends them in one write (one round trip).
    const found = await Promise.all(candidates.map((key) => l2.lookup(key)));
    let entry: CacheEntry | undefined;
    let token: string | undefined;
    found.forEach((result, index) => {
      if (result.kind !== 'hit') return;
      const kept = promote(candidates[index]!, result.entry);
      if (entry === undefined || kept.storedAt > entry.storedAt) [entry, token] = [kept, candidateTokens[index]];
    });
    if (token !== undefined) tokenMemo.remember(req.keys, token);
    return { entry, answered: found.every((result) => result.kind !== 'skipped') };
  } catch (err) {
    logger.error({ err: (err as Error).message }, 'L2 lookup failed');
    return { entry: undefined, answered: false };
  }
}

/** Marking stale here, on the other replicas (the bus) and for those that start later (Redis). */
function markingMethods(marking: Marking, shared: SharedTier | undefined): Pick<Tiers, 'markStale' | 'loadMarks'> {
  return {
    markStale(scopes, source) {
      const at = Date.now();
      const ids = scopes.map(scopeId);
      const marked = marking.mark(ids, { at, source, observed: false });
      shared?.bus.marked(ids, at, source);
      shared?.marks.persist(ids, at);
      return marked;
    },
    async loadMarks() {
      const found = (await shared?.marks.load(Date.now())) ?? [];
      for (const [id, at] of found) marking.mark([id], { at, source: 'webhook', observed: true });
    },
  };
}

/** With L1 off, the L2 store's memo of decoded values is bounded at a sixty-fourth of cache.max_bytes (redis-store.ts). */
const L2_MEMO_SHARE = 64;

function createSharedTier(
  redis: RedisConnection,
  {
    lockMs,
    marks,
    l1,
    maxBytes,
    headerTable,
  }: Pick<TierSettings, 'lockMs' | 'l1' | 'maxBytes'> & { marks: StaleMarksSettings; headerTable: HeaderTable },
  metrics: Metrics,
  logger: Logger,
  remote: InvalidationHandlers,
): SharedTier {
  const l2 = createRedisStore(redis, logger, metrics, l1 ? 0 : Math.floor(maxBytes / L2_MEMO_SHARE), headerTable);
  const bus = createInvalidationBus(redis, remote, logger);
  /** Pending L2 writes by key: a flight lock is released only once its entry is readable in L2. */
  const writes = new Map<string, Promise<void>>();
  return {
    l2,
    lock: createFlightLock(redis, l2, lockMs, headerTable),
    bus,
    marks: createSharedMarks(redis, marks.horizonMs, marks.maxScopes),
    store(key, entry, ttlMs) {
      const write = l2.set(key, entry, ttlMs).then(
        () => bus.written(key, entry.storedAt),
        () => undefined,
      );
      writes.set(key, write);
      void write.finally(() => {
        if (writes.get(key) === write) writes.delete(key);
      });
    },
    drop(key) {
      l2.delete(key).then(
        () => bus.dropped(key),
        () => undefined,
      );
    },
    written: (key) => writes.get(key),
  };
}
