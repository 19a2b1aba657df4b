/**
 * L1: an in-process LRU bounded by total bytes, with a per-entry size cap. A memo of forms of its
 * entries held beside it (the decoded bodies of src/cache/store/entry-form.ts) can count against the
 * same bound (`beside`): L1 then gives way, evicting its least recently used entries, until L1 and
 * the memo fit in `maxBytes` together; and an entry that leaves L1 takes its form with it.
 * Below it: the index of L1's keys by upstream and path (`createPathIndex`), and stale marks as L1
 * sees them (`createMarking`).
 */
import { LRUCache } from 'lru-cache';
import { entrySize } from './entry-codec.js';
import type { CacheEntry } from '../rules/entry.js';
import {
  keyPath,
  segmentsOf,
  type PathScope,
  parseScopeId,
  createStaleMarks,
  markedStale,
  originOf,
  type Mark,
  type StaleMarksSettings,
} from '../rules/stale-marks.js';
import type { Metrics } from '../../platform/metrics/registry.js';

/** A memo of forms of L1's entries, held beside it and counted against its bound. */
export interface Beside {
  /** Bytes held, as counted against the bound. */
  readonly bytes: number;
  /** The entry left L1 (evicted, expired, deleted, replaced): its form goes too. */
  forget(entry: CacheEntry): void;
}

export interface MemoryStoreOptions {
  maxBytes: number;
  maxEntryBytes: number;
  onEvict?: () => void;
  /** What is held beside the store and counts against `maxBytes` (read after every store, and by `fit`). */
  beside?: Beside;
  /** A key entered the store, and left it (evicted, expired, deleted, or replaced by a value over the entry cap): the path index. */
  onKeys?: { added(key: string): void; removed(key: string): void };
}

/**
 * A store of entries by key, knowing nothing of HTTP (undici's cache stores are the model): L1 here,
 * in memory and synchronous; L2 in Redis (redis-store.ts), asynchronous. The cache (cache.ts) sits
 * over one or both.
 */
export interface Store<Got, Done> {
  get(key: string): Got;
  set(key: string, entry: CacheEntry, ttlMs: number): Done;
  delete(key: string): Done;
}

/** L1: a synchronous store, bounded in bytes, with what the path index and the gauges read of it. */
export interface MemoryStore extends Store<CacheEntry | undefined, void> {
  /** The entry without touching its recency (undefined once expired). */
  peek(key: string): CacheEntry | undefined;
  /** Replaces a held entry, keeping its expiry (a stale mark); nothing when the key is not held. */
  replace(key: string, entry: CacheEntry): void;
  readonly size: number;
  readonly bytes: number;
  /** Body bytes of the entries held: as stored (encoded) and decoded (the compression metric). */
  readonly bodyBytes: { stored: number; decoded: number };
  keys(): IterableIterator<string>;
  clear(): void;
  /** Evicts the least recently used entries until the store and what is beside it fit in maxBytes (after the memo grew). */
  fit(): void;
  /** Changes whenever an entry is stored, replaced or leaves: what was found before may no longer be held (token-memo.ts). */
  readonly generation: number;
}

export function createMemoryStore(opts: MemoryStoreOptions): MemoryStore {
  /** The entries counted in bodyBytes (an entry the LRU refused is never counted, nor uncounted). */
  const counted = new WeakSet<CacheEntry>();
  const bodyBytes = { stored: 0, decoded: 0 };
  const lru = new LRUCache<string, CacheEntry>({
    maxSize: opts.maxBytes,
    maxEntrySize: opts.maxEntryBytes,
    sizeCalculation: (entry, key) => entrySize(key, entry),
    ttlAutopurge: false,
    allowStale: false,
    updateAgeOnGet: false,
    dispose: (entry: CacheEntry, key: string, reason: LRUCache.DisposeReason) => {
      store.generation++;
      opts.beside?.forget(entry);
      if (counted.delete(entry)) {
        bodyBytes.stored -= entry.body.length;
        bodyBytes.decoded -= entry.decodedSize;
      }
      if (reason === 'evict') opts.onEvict?.();
      // 'set': replaced by a new value (still held), or dropped for a value over the cap (set() checks).
      if (reason !== 'set') opts.onKeys?.removed(key);
    },
    ...(opts.onKeys === undefined
      ? {}
      : {
          onInsert: (_v: CacheEntry, key: string, reason: LRUCache.InsertReason) => {
            if (reason === 'add') opts.onKeys?.added(key);
          },
        }),
  });
  /** Counts a stored entry's body bytes once (the gauges of stored and decoded bytes). */
  const countIn = (key: string, entry: CacheEntry): void => {
    if (lru.peek(key) !== entry || counted.has(entry)) return;
    counted.add(entry);
    bodyBytes.stored += entry.body.length;
    bodyBytes.decoded += entry.decodedSize;
  };
  const beside = opts.beside;
  const fit = (): void => {
    if (beside === undefined) return;
    const room = opts.maxBytes - beside.bytes;
    while (lru.size > 0 && lru.calculatedSize > room) lru.pop();
  };
  const store: MemoryStore & { generation: number } = {
    get: (key) => lru.get(key),
    peek: (key) => lru.peek(key),
    set: (key, entry, ttlMs) => {
      store.generation++;
      lru.set(key, entry, { ttl: Math.max(1, Math.ceil(ttlMs)) });
      if (opts.onKeys !== undefined && !lru.has(key)) opts.onKeys.removed(key);
      countIn(key, entry);
      fit();
    },
    replace: (key, entry) => {
      if (!lru.has(key)) return;
      store.generation++;
      lru.set(key, entry, { noUpdateTTL: true });
      countIn(key, entry);
      fit();
    },
    delete: (key) => {
      lru.delete(key);
    },
    get size() {
      return lru.size;
    },
    get bytes() {
      return lru.calculatedSize;
    },
    get bodyBytes() {
      return { ...bodyBytes };
    },
    keys: () => lru.keys(),
    clear: () => lru.clear(),
    fit,
    // A field, not a getter: the token memo reads it on every per-token hit without a call here.
    generation: 0,
  };
  return store;
}

/*
 * The keys L1 holds, indexed by upstream and path (normal form, stale-marks.ts), so that marking a
 * scope stale touches the entries under it and nothing else: an exact scope is one node, a prefix
 * scope one subtree; never a scan of the whole L1. A tree of path segments per upstream; each node
 * holds the keys stored under exactly its path (every query, partition and representation).
 *
 * L1 keeps it current (memory-store.ts hooks): a key is added when it enters the LRU and removed
 * when it leaves (eviction, expiry, deletion). The keys are the LRU's own strings; the index adds a
 * set slot per key and a node per distinct path segment.
 */
interface Node {
  keys: Set<string> | undefined;
  children: Map<string, Node> | undefined;
}

export interface PathIndex {
  add(key: string): void;
  remove(key: string): void;
  /** The keys in a scope: those stored under its exact path, or (prefix) under it and below. */
  keysIn(scope: PathScope): string[];
  /** Keys indexed (for tests and /admin/cache/stats). */
  readonly size: number;
}

const newNode = (): Node => ({ keys: undefined, children: undefined });

export function createPathIndex(): PathIndex {
  const roots = new Map<string, Node>();
  let size = 0;

  const find = (upstream: string, path: string): Node | undefined => {
    let node = roots.get(upstream);
    for (const segment of segmentsOf(path)) {
      if (node === undefined) return undefined;
      node = node.children?.get(segment);
    }
    return node;
  };

  const collect = (node: Node, out: string[]): void => {
    if (node.keys !== undefined) for (const key of node.keys) out.push(key);
    if (node.children !== undefined) for (const child of node.children.values()) collect(child, out);
  };

  return {
    add(key) {
      const where = keyPath(key);
      if (where === undefined) return;
      let node = roots.get(where.upstream);
      if (node === undefined) roots.set(where.upstream, (node = newNode()));
      for (const segment of segmentsOf(where.path)) {
        node.children ??= new Map();
        let child = node.children.get(segment);
        if (child === undefined) node.children.set(segment, (child = newNode()));
        node = child;
      }
      node.keys ??= new Set();
      if (!node.keys.has(key)) {
        node.keys.add(key);
        size++;
      }
    },
    remove(key) {
      const where = keyPath(key);
      if (where === undefined) return;
      const root = roots.get(where.upstream);
      if (root === undefined) return;
      // The path from the root, to prune the nodes the key leaves empty.
      const trail: Array<[Node, string]> = [];
      let node: Node | undefined = root;
      for (const segment of segmentsOf(where.path)) {
        const child: Node | undefined = node.children?.get(segment);
        if (child === undefined) return;
        trail.push([node, segment]);
        node = child;
      }
      if (node.keys?.delete(key) !== true) return;
      size--;
      if (node.keys.size === 0) node.keys = undefined;
      for (let at = trail.length - 1; at >= 0; at--) {
        const [parent, segment] = trail[at]!;
        const child = parent.children!.get(segment)!;
        if (child.keys !== undefined || (child.children !== undefined && child.children.size > 0)) break;
        parent.children!.delete(segment);
      }
      if (root.keys === undefined && (root.children === undefined || root.children.size === 0)) roots.delete(where.upstream);
    },
    keysIn(scope) {
      const node = find(scope.upstream, scope.path);
      if (node === undefined) return [];
      if (!scope.prefix) return node.keys === undefined ? [] : [...node.keys];
      const out: string[] = [];
      collect(node, out);
      return out;
    },
    get size() {
      return size;
    },
  };
}

/*
 * Stale marks as L1 sees them: the path index of its keys (above) and the marks
 * remembered (stale-marks.ts). A mark turns every L1 entry in its scopes stale at once, through the
 * index; entries that reach L1 later (read from L2, or stored by an exchange that began before the
 * mark) are checked as they arrive. The hit path (cache.ts `hit`) does not change: a marked entry is
 * simply an entry with no freshness left.
 */
export interface Marking {
  readonly index: PathIndex;
  /** Scopes remembered. */
  readonly scopes: number;
  /**
   * Marks the scopes (ids, stale-marks.ts) stale in L1 and remembers them; returns the L1 entries
   * in them (all marked before the call returns, or, past MARKED_PER_TURN, within the next turns).
   */
  mark(ids: readonly string[], mark: Mark): number;
  /**
   * `entry` as it may be kept under `key`: marked stale when a mark covering its path was made at
   * or after `origin`: when its request went upstream (an exchange's answer may predate a change
   * announced while it was in flight), else when its representation was last known current
   * (`originOf`, for an entry read from L2: when the replica that wrote it sent its request).
   */
  checked(key: string, entry: CacheEntry, now: number, origin?: number): CacheEntry;
  /** An exchange for `key` stored or confirmed an entry; `changed`: a new representation came back. */
  settled(key: string, changed: boolean, now: number): void;
}

/**
 * Entries marked in one turn of the event loop (a few µs each): a scope with more (a purge of "/",
 * an owner's prefix) goes on in later turns, so requests are not held up. An entry stored between
 * two turns is checked against the mark like any other (`checked`), not marked blindly.
 */
const MARKED_PER_TURN = 2_000;

export const DEFAULT_MARK_SETTINGS: StaleMarksSettings = { horizonMs: 3_600_000, maxScopes: 100_000, maxPending: 100_000 };

/** `l1` is resolved lazily: the store is built with the index's hooks, after the index (none with `cache.l1: false`). */
export function createMarking(settings: StaleMarksSettings, metrics: Metrics, l1: () => MemoryStore | undefined): Marking {
  const index = createPathIndex();
  const marks = createStaleMarks(settings);
  return {
    index,
    get scopes() {
      return marks.size;
    },
    mark(ids, mark) {
      marks.remember(ids, mark);
      const store = l1();
      if (store === undefined) return 0;
      // Scopes of one delivery overlap (a repository and its issues): each entry counts once.
      const keys = new Set<string>();
      for (const id of ids) {
        const scope = parseScopeId(id);
        if (scope !== undefined) for (const key of index.keysIn(scope)) keys.add(key);
      }
      const queue = [...keys];
      const markSome = (from: number, blindly: boolean): void => {
        let count = 0;
        const end = Math.min(queue.length, from + MARKED_PER_TURN);
        for (let position = from; position < end; position++) {
          const key = queue[position]!;
          const entry = store.peek(key);
          if (entry === undefined) continue;
          // Later turns: an entry stored since the mark was checked as it arrived.
          if (!blindly && originOf(entry) > mark.at) continue;
          store.replace(key, markedStale(entry));
          marks.pending(key, mark);
          count++;
        }
        if (count > 0) metrics.cacheInvalidations.inc({ source: mark.source }, count);
        if (end < queue.length) setImmediate(() => markSome(end, false));
      };
      markSome(0, true);
      return queue.length;
    },
    checked(key, entry, now, origin = originOf(entry)) {
      if (marks.size === 0) return entry;
      const mark = marks.covering(key, origin, now);
      if (mark === undefined) return entry;
      marks.pending(key, mark);
      return markedStale(entry);
    },
    settled(key, changed, now) {
      const seconds = marks.settle(key, changed, now);
      if (seconds !== undefined) metrics.webhookStaleness.observe(seconds);
    },
  };
}
