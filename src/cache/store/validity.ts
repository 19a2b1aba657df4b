/**
 * Whether a stored entry may still answer a request, beyond its own freshness, kept apart from the
 * stores that hold entries (cache.ts):
 *
 *   invalidations  a path after a successful unsafe method (RFC 9111 section 4.4): entries stored
 *                  before then are not used
 *   rejections     what the upstream refused to a credential since the entry was stored (rejections.ts)
 *   marks          path scopes a webhook delivery or a purge marked stale (memory-store.ts): held entries
 *                  turn stale at once, and entries that arrive later are checked as they come
 *   tokens         for non-equivalent pool tokens, which token's entry a hit looks at first (token-memo.ts)
 *
 * What this replica invalidates, rejects or marks it tells the others through the shared tier
 * (shared-tier.ts), when there is one; what they tell it comes in through `remembered` and `marked`.
 */
import type { Metrics } from '../../platform/metrics/registry.js';
import type { Rejection } from '../rules/classify.js';
import { fieldValue, type CacheEntry } from '../rules/entry.js';
import { pathScope, varyMatches } from '../rules/key.js';
import { scopeId, type PathScope, type MarkSource, type StaleMarksSettings } from '../rules/stale-marks.js';
import type { CacheRequest } from '../rules/request.js';
import { createMarking, type Marking, type MemoryStore } from './memory-store.js';
import { createRejectionMemo, rememberBounded, type RejectionMemo } from './rejections.js';
import type { SharedTier } from './shared-tier.js';
import { createTokenMemo, type TokenMemo } from './token-memo.js';

/** At most this many invalidated path scopes are remembered (oldest forgotten first). */
const MAX_INVALIDATIONS = 10_000;

/** Whether the request selects the entry by its Vary (values in normal form under `rfc9111`). */
function varyUsable(req: CacheRequest, entry: CacheEntry): boolean {
  if (entry.vary === null) return true;
  return varyMatches(
    entry.vary,
    (name) => req.header(name),
    req.policy.kind === 'rfc9111',
    () => fieldValue(entry.headers, 'content-language'),
  );
}

export class Validity {
  /** L1's keys by path, and the stale marks remembered. */
  readonly marking: Marking;
  /** Non-equivalent pool tokens: per flight key, the token whose entry is the newest. */
  readonly tokens: TokenMemo;
  /** Path scope -> when it was invalidated. */
  readonly #invalidations = new Map<string, number>();
  readonly #rejections: RejectionMemo = createRejectionMemo();
  readonly #shared: () => SharedTier | undefined;
  /**
   * Nothing invalidated and nothing rejected yet: an entry without Vary needs no check (a field, read
   * on the hit path without a call). Both are remembered for good (bounded), so it only turns false.
   */
  clean = true;

  /** `l1` and `shared` are read when needed: the stores are built around this object. */
  constructor(settings: StaleMarksSettings, metrics: Metrics, l1: () => MemoryStore | undefined, shared: () => SharedTier | undefined) {
    this.marking = createMarking(settings, metrics, l1);
    this.tokens = createTokenMemo();
    this.#shared = shared;
  }

  /** The entry if this request may use it: Vary matches, its path not invalidated since, its credential not rejected since. */
  usable(req: CacheRequest, entry: CacheEntry | undefined): CacheEntry | undefined {
    if (entry === undefined || !varyUsable(req, entry)) return undefined;
    if (this.clean) return entry;
    if (this.#rejections.size > 0 && this.#rejections.rejectedSince(req.keys.flight, req.keys.partition, entry.storedAt)) return undefined;
    if (this.#invalidations.size === 0) return entry;
    const at = this.#invalidations.get(pathScope(req.upstream, req.pathname));
    return at !== undefined && entry.storedAt <= at ? undefined : entry;
  }

  /** A path invalidation or a rejection, made here or told by another replica (the bus's scopes). */
  remembered(scope: string, at: number): void {
    this.clean = false;
    if (this.#rejections.isRejection(scope)) this.#rejections.remember(scope, at);
    else rememberBounded(this.#invalidations, scope, at, MAX_INVALIDATIONS);
  }

  /** Forgets every stored response for a path (after a successful unsafe method), on every replica. */
  invalidatePath(upstream: string, pathname: string): void {
    const at = Date.now();
    const scope = pathScope(upstream, pathname);
    this.remembered(scope, at);
    this.#shared()?.bus.path(scope, at);
  }

  /** Remembers what the upstream rejected, here and on every replica. */
  rejected(rejection: Rejection): void {
    const at = Date.now();
    this.clean = false;
    for (const scope of this.#rejections.scopesOf(rejection)) {
      this.#rejections.remember(scope, at);
      this.#shared()?.bus.path(scope, at);
    }
  }

  /** Marks every entry in these scopes stale, on every replica; returns the entries in them in this replica's L1. */
  markStale(scopes: readonly PathScope[], source: MarkSource): number {
    const at = Date.now();
    const ids = scopes.map(scopeId);
    const marked = this.marking.mark(ids, { at, source, observed: false });
    const shared = this.#shared();
    shared?.bus.marked(ids, at, source);
    shared?.marks.persist(ids, at);
    return marked;
  }

  /** Scopes another replica marked stale. */
  marked(ids: readonly string[], at: number, source: string): void {
    this.marking.mark(ids, { at, source: source === 'purge' ? 'purge' : 'webhook', observed: false });
  }

  /** Reads the marks other replicas made before this one started (Redis); never throws. */
  async loadMarks(): Promise<void> {
    const found = (await this.#shared()?.marks.load(Date.now())) ?? [];
    for (const [id, at] of found) this.marking.mark([id], { at, source: 'webhook', observed: true });
  }
}
