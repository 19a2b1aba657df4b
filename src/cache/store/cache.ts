/**
 * The cache: one object over two stores shaped like undici's (memory-store.ts `Store`: get, set,
 * delete, knowing nothing of HTTP). L1 is in memory and synchronous; L2 is Redis, shared by every
 * replica (shared-tier.ts). `cache.l1: false` is simply no L1 store, and no Redis no L2 store. What
 * may still be used beyond an entry's own freshness (invalidations, rejections, stale marks, the
 * token memo) is the validity's (validity.ts).
 *
 *   hit      one synchronous call: key, L1 lookup, usability, plan, this client's form and
 *            Cache-Status; a ready reply, or a miss (with the plan when L1 held an entry)
 *   lookup   L2, when L1 had nothing: every candidate key, promoting what it finds into L1
 *   answer   the same as `hit` for an entry found in L2
 *   apply    stores or drops what an upstream exchange produced, in L1 and L2, and tells the others
 */
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { RedisConnection } from '../../platform/redis/connection.js';
import { ownedCopy } from '../../platform/bytes.js';
import { cacheStatus } from '../../http/headers/fields.js';
import type { FormReply, Served } from '../../http/reply.js';
import type { CacheResult } from '../rules/classify.js';
import { NO_CACHE_IGNORED } from '../rules/client-directives.js';
import { poolTokenOf, type CacheEntry } from '../rules/entry.js';
import { planFor, retentionSeconds, type Plan } from '../rules/policy.js';
import type { CacheRequest } from '../rules/request.js';
import type { StaleMarksSettings } from '../rules/stale-marks.js';
import type { EntryForms } from './entry-form.js';
import { createHeaderTable, type HeaderTable } from './header-intern.js';
import type { InvalidationHandlers } from './invalidation-bus.js';
import { DEFAULT_MARK_SETTINGS, createMemoryStore, type Beside, type MemoryStore } from './memory-store.js';
import { createSharedTier, type SharedTier } from './shared-tier.js';
import { Validity } from './validity.js';

export interface CacheSettings {
  l1: boolean;
  maxBytes: number;
  maxEntryBytes: number;
  /** Redis lock time for the distributed single flight (redis.lock_ms). */
  lockMs: number;
  /** How long stale marks are remembered, and how many (memory-store.ts); DEFAULT_MARK_SETTINGS when unset. */
  marks?: StaleMarksSettings;
  /** The memo beside L1 that counts against maxBytes (the decoded bodies): L1 gives way to it (memory-store.ts). */
  besideL1?: Beside;
  /** The header fields the entries share (header-intern.ts); a table of the cache's own when unset. */
  headerTable?: HeaderTable;
}

/** What an L2 lookup found; `answered` is false when Redis did not answer (down, breaker open, too slow). */
export interface Found {
  entry: CacheEntry | undefined;
  answered: boolean;
}

/** A stored entry in this client's form, ready for `answer()` (the path adds the pool's headers as `extra`, and `ranges`). */
export type Ready = FormReply & {
  readonly entry: CacheEntry;
  /** Served while fresh (refresh ahead may be due), else stale. */
  readonly fresh: boolean;
  /** Stale under stale-while-revalidate: revalidate in the background. */
  readonly background: boolean;
};

/** What `hit` found: a ready reply, an entry in a coding the client refused, or a miss. */
export type Hit =
  | Ready
  /** The client explicitly refused the stored coding, which may not be changed: forward, preferring the token that fetched it. */
  | { readonly kind: 'refused-coding'; readonly prefer: string | undefined }
  /** Go upstream (`plan`), or, with `plan` undefined, L1 held nothing: look in L2. */
  | { readonly kind: 'miss'; readonly plan: Plan | undefined };

const HIT: Served = { outcome: 'hit', upstreamStatus: undefined, token: undefined };
export const STALE: Served = { outcome: 'stale', upstreamStatus: undefined, token: undefined };

/** Fresh hits' Cache-Status values are kept for ttls up to this many seconds. */
const HIT_STATUS_MEMO_SECONDS = 3600;
/** With L1 off, the L2 store's memo of decoded values is bounded at a sixty-fourth of cache.max_bytes (redis-store.ts). */
const L2_MEMO_SHARE = 64;

export class Cache {
  readonly l1: MemoryStore | undefined;
  readonly shared: SharedTier | undefined;
  readonly validity: Validity;
  /** The header fields its entries share: classify stores new entries' fields through it (`headerTable.pair`). */
  readonly headerTable: HeaderTable;
  /** A fresh hit's Cache-Status by whole seconds of ttl, plain and with an ignored no-cache: made once per value. */
  readonly #hitStatuses = [new Map<number, string>(), new Map<number, string>()] as const;
  readonly #logger: Logger;

  constructor(settings: CacheSettings, metrics: Metrics, logger: Logger, redis: RedisConnection | undefined) {
    const marks = settings.marks ?? DEFAULT_MARK_SETTINGS;
    this.#logger = logger;
    this.headerTable = settings.headerTable ?? createHeaderTable();
    this.validity = new Validity(
      marks,
      metrics,
      () => this.l1,
      () => this.shared,
    );
    const index = this.validity.marking.index;
    this.l1 = !settings.l1
      ? undefined
      : createMemoryStore({
          maxBytes: settings.maxBytes,
          maxEntryBytes: settings.maxEntryBytes,
          ...(settings.besideL1 === undefined ? {} : { beside: settings.besideL1 }),
          onEvict: () => metrics.cacheEvictions.inc(),
          onKeys: { added: (key) => index.add(key), removed: (key) => index.remove(key) },
        });
    const memoBytes = settings.l1 ? 0 : Math.floor(settings.maxBytes / L2_MEMO_SHARE);
    this.shared =
      redis === undefined
        ? undefined
        : createSharedTier(
            redis,
            { lockMs: settings.lockMs, marks, memoBytes, headerTable: this.headerTable },
            metrics,
            logger,
            this.#remote(),
          );
  }

  /**
   * The hit path, synchronous: the request's entry in L1 (with non-equivalent pool tokens, the one
   * token's the memo names first: token-memo.ts), checked, planned and put in this client's form.
   * `forms` and `headers`: the upstream's forms of its entries and the request's headers (coding, public base).
   */
  hit(req: CacheRequest, forms: EntryForms, headers: Readonly<Record<string, string | string[] | undefined>>): Hit {
    const held = this.held(req);
    if (held === undefined && this.shared !== undefined) return NOT_IN_L1;
    return this.answer(req, held, forms, headers);
  }

  /** What `hit` answers for an entry held (in L1, or found in L2): ready, refused, or the plan of a miss. */
  answer(
    req: CacheRequest,
    held: CacheEntry | undefined,
    forms: EntryForms,
    headers: Readonly<Record<string, string | string[] | undefined>>,
  ): Hit {
    // Nothing invalidated or rejected, and no Vary beyond the key (most entries): usable as it is.
    const usable = held === undefined || (held.vary === null && this.validity.clean) ? held : this.validity.usable(req, held);
    const plan = planFor(usable, req.directives, Date.now());
    if (plan.kind === 'fetch' || plan.kind === 'only-if-cached') return { kind: 'miss', plan };
    const { entry } = plan;
    const form = forms.formFor(headers, entry);
    if (form === undefined) return { kind: 'refused-coding', prefer: poolTokenOf(entry.fetchedBy) };
    // The path adds the pool's headers (`extra`) and whether ranges of it are served (`ranges`).
    const fresh = plan.kind === 'fresh';
    return {
      kind: 'form',
      form,
      cacheStatus: fresh
        ? this.#hitStatus(plan.ttl, req.detail)
        : cacheStatus({ hit: true, ttl: plan.ttl, detail: plan.background ? 'stale-while-revalidate' : 'max-stale' }),
      age: plan.age,
      extra: undefined,
      ranges: false,
      ...(fresh ? HIT : STALE),
      entry,
      fresh,
      background: !fresh && plan.background,
    };
  }

  /** The entry L1 holds for the request, usable or not (refresh ahead checks it is still the one it read). */
  held(req: CacheRequest): CacheEntry | undefined {
    const l1 = this.l1;
    if (l1 === undefined) return undefined;
    const { keys } = req;
    if (!keys.perToken) return l1.get(keys.flight);
    const { validity } = this;
    return validity.tokens.fromL1(
      req,
      l1,
      (entry) => (entry.vary === null && validity.clean) || validity.usable(req, entry) !== undefined,
      Date.now(),
    );
  }

  /** L2 (every candidate key, in one pipelined round trip), each hit promoted into L1; the newest is the answer. */
  async lookup(req: CacheRequest): Promise<Found> {
    const shared = this.shared;
    if (shared === undefined) return { entry: undefined, answered: true };
    const { l2 } = shared;
    const { candidates, candidateTokens } = req.keys;
    try {
      if (candidates.length === 1) {
        // The common case (one key): no arrays, no Promise.all.
        const result = await l2.get(candidates[0]!);
        const entry = result.kind === 'hit' ? this.promote(candidates[0]!, result.entry) : undefined;
        if (entry !== undefined && candidateTokens[0] !== undefined) this.validity.tokens.remember(req.keys, candidateTokens[0]);
        return { entry, answered: result.kind !== 'skipped' };
      }
      // Issued in one tick: ioredis' auto-pipelining sends them in one write (one round trip).
      const found = await Promise.all(candidates.map((key) => l2.get(key)));
      let entry: CacheEntry | undefined;
      let token: string | undefined;
      found.forEach((result, index) => {
        if (result.kind !== 'hit') return;
        const kept = this.promote(candidates[index]!, result.entry);
        if (entry === undefined || kept.storedAt > entry.storedAt) [entry, token] = [kept, candidateTokens[index]];
      });
      if (token !== undefined) this.validity.tokens.remember(req.keys, token);
      return { entry, answered: found.every((result) => result.kind !== 'skipped') };
    } catch (err) {
      this.#logger.error({ err: (err as Error).message }, 'L2 lookup failed');
      return { entry: undefined, answered: false };
    }
  }

  /** The entry if this request may use it (validity.ts). */
  usable(req: CacheRequest, entry: CacheEntry | undefined): CacheEntry | undefined {
    return this.validity.usable(req, entry);
  }

  /**
   * Stores or drops what an exchange produced. `sentAt`: when its request went upstream (a stale
   * mark made since then covers its answer). `req`: the request whose exchange it was (its stored
   * token becomes the one a hit looks at first).
   */
  apply(result: CacheResult, sentAt?: number, req?: CacheRequest): void {
    if (result.kind !== 'entry') return;
    if (result.rejected !== undefined) this.validity.rejected(result.rejected);
    const answered = result.transient ? undefined : (result.storeKey ?? result.dropKey);
    const { marking } = this.validity;
    if (answered !== undefined) marking.settled(answered, result.fwdStatus !== 304, Date.now());
    if (result.storeKey !== undefined) {
      const key = result.storeKey;
      const entry = marking.checked(key, result.entry, Date.now(), sentAt);
      const ttlMs = retentionSeconds(entry) * 1000;
      this.l1?.set(key, entry, ttlMs);
      this.shared?.store(key, entry, ttlMs);
      if (req?.keys.perToken === true && result.token !== undefined) this.validity.tokens.remember(req.keys, result.token);
    } else if (result.dropKey !== undefined) {
      this.l1?.delete(result.dropKey);
      this.shared?.drop(result.dropKey);
    }
  }

  /**
   * Puts an entry read from L2 into L1 for what is left of its retention (its body copied out of the
   * Redis reply, pinning nothing larger); returns it as kept (marked stale when a mark covers it).
   */
  promote(key: string, found: CacheEntry): CacheEntry {
    const now = Date.now();
    const entry = this.validity.marking.checked(key, found, now);
    if (this.l1 === undefined) return entry;
    const ttlMs = entry.storedAt + retentionSeconds(entry) * 1000 - now;
    if (ttlMs > 0) this.l1.set(key, { ...entry, body: ownedCopy(entry.body) }, ttlMs);
    return entry;
  }

  /** Resolves once a pending L2 write of `key` is done (a flight lock is released only then). */
  written(key: string): Promise<void> {
    return this.shared?.written(key) ?? Promise.resolve();
  }

  close(): void {
    this.shared?.bus.close();
  }

  /** A fresh hit's Cache-Status, made once per whole second of ttl (up to an hour) rather than per hit. */
  #hitStatus(ttl: number, detail: string | undefined): string {
    const seconds = Math.trunc(ttl);
    const memo = detail === undefined ? this.#hitStatuses[0] : detail === NO_CACHE_IGNORED ? this.#hitStatuses[1] : undefined;
    let status = memo?.get(seconds);
    if (status === undefined) {
      status = cacheStatus({ hit: true, ttl: seconds, detail });
      if (seconds >= 0 && seconds <= HIT_STATUS_MEMO_SECONDS) memo?.set(seconds, status);
    }
    return status;
  }

  /** Notices from other replicas (invalidation-bus.ts). */
  #remote(): InvalidationHandlers {
    return {
      entry: (key, storedAt) => {
        const entry = this.l1?.get(key);
        if (entry !== undefined && entry.storedAt < storedAt) this.l1?.delete(key);
      },
      dropped: (key) => this.l1?.delete(key),
      path: (scope, at) => this.validity.remembered(scope, at),
      marked: (ids, at, source) => this.validity.marked(ids, at, source),
    };
  }
}

const NOT_IN_L1: Hit = { kind: 'miss', plan: undefined };
