/**
 * Bytes held or read, bounded: the memo bounded in bytes, copies in allocations of their own
 * size, and a stream read up to a cap.
 *
 * The one bounding policy of the in-process memos: bytes, least recently used first. What clients
 * send decides most keys (credentials, paths, flight keys, Host names), so the bound is on what the
 * entries weigh, not on how many there are. Each memo belongs to the instance that uses it (built
 * from src/main/services.ts), never to a module, and reports its size in `etagere_cache_bytes`.
 * Pure (no I/O, no timers); a hit allocates nothing.
 */
import { LRUCache } from 'lru-cache';
import type { Readable } from 'node:stream';

export interface Memo<K, V> {
  /** The value, now the most recently used. */
  get(key: K): V | undefined;
  /** The value, its recency unchanged. */
  peek(key: K): V | undefined;
  /** Keeps the value (the least recently used go to make room); one that alone passes the bound is not kept. */
  set(key: K, value: V): void;
  delete(key: K): void;
  clear(): void;
  /** Bytes held, as counted. */
  readonly bytes: number;
}

/** A memo of at most `maxBytes`, each entry counted as `bytesOf` says. */
export function createMemo<K extends object | string, V extends object | string>(
  maxBytes: number,
  bytesOf: (key: K, value: V) => number,
): Memo<K, V> {
  const lru = new LRUCache<K, V>({
    maxSize: Math.max(1, maxBytes),
    sizeCalculation: (value, key) => Math.max(1, Math.ceil(bytesOf(key, value))),
  });
  // lru-cache makes an options object per call when given none: one of the memo's own, so a hit allocates nothing.
  const getOptions: LRUCache.GetOptions<K, V, unknown> = {};
  const peekOptions: LRUCache.PeekOptions<K, V, unknown> = {};
  return {
    get: (key) => lru.get(key, getOptions),
    peek: (key) => lru.peek(key, peekOptions),
    set(key, value) {
      lru.set(key, value);
    },
    delete(key) {
      lru.delete(key);
    },
    clear() {
      lru.clear();
    },
    get bytes() {
      return lru.calculatedSize;
    },
  };
}

/** Per-entry cost beyond the characters: the slot and the two string headers (an estimate on the high side). */
const ENTRY_OVERHEAD = 96;

/** A string-to-string memo (credential -> partition, path -> route template, flight key -> pool token). */
export type BoundedMemo = Memo<string, string>;

/** The cost counted for one entry: two bytes a character, plus ENTRY_OVERHEAD. */
export function memoEntryBytes(key: string, value: string): number {
  return 2 * (key.length + value.length) + ENTRY_OVERHEAD;
}

/** A string-to-string memo of at most `maxBytes`; a key longer than `maxKeyChars` is never kept. */
export function createBoundedMemo(maxBytes: number, maxKeyChars: number): BoundedMemo {
  const memo = createMemo<string, string>(maxBytes, memoEntryBytes);
  return {
    ...memo,
    set(key, value) {
      if (key.length > maxKeyChars || memoEntryBytes(key, value) > maxBytes) return;
      // A new value for a held key replaces it (the token memo: the newest entry's token).
      if (memo.peek(key) !== value) memo.set(key, value);
    },
    get bytes() {
      return memo.bytes;
    },
  };
}

/*
 * Bytes a cache entry keeps for long: always in memory of their own, exactly their size. A Buffer
 * under 4 KiB made by `Buffer.concat`, `Buffer.from` or `allocUnsafe` is a slice of a shared 8 KiB
 * slab, and a socket chunk or a Redis reply can be far larger than the part an entry needs: kept
 * in the cache, such a view pins all of it, which the cache's byte bound does not see (a gzipped
 * 1 KB body could hold 8 KiB, most of it the garbage of other requests).
 */
/** A copy of `bytes` in an allocation of its own. */
export function ownedCopy(bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafeSlow(bytes.length);
  out.set(bytes);
  return out;
}

/** `chunks` (`size` bytes in all) joined in an allocation of their own. */
export function ownedConcat(chunks: readonly Uint8Array[], size: number): Buffer {
  const out = Buffer.allocUnsafeSlow(size);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return at === size ? out : out.subarray(0, at);
}

/*
 * A stream's bytes, read up to a cap: every bounded read of the proxy (a client's request body, a
 * webhook delivery, an upstream answer for the cache, an App's installation list, an issuer's
 * discovery document, a token's GET /rate_limit). Past the cap it stops reading and leaves the
 * stream paused and unconsumed: the caller drops the rest (`resume()`), destroys it, or hands it on.
 * Each caller keeps its own limit, errors and timeouts.
 */
export type CappedRead =
  | { kind: 'read'; chunks: Buffer[]; size: number }
  /** Past the cap: `chunks` are what was read, the chunk that went past it included. */
  | { kind: 'over'; chunks: Buffer[]; size: number }
  /** One of the failure events came first; `error` is its argument (none for `aborted` or `close`). */
  | { kind: 'failed'; error: unknown };

/** One read in progress: `done` settles once, unless `stop()` came first. */
export class CappedReader {
  readonly done: Promise<CappedRead>;
  readonly #stream: Readable;
  readonly #maxBytes: number;
  readonly #failOn: readonly string[];
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #settle: (read: CappedRead) => void = () => undefined;

  /** `failOn`: the stream's events that end the read as failed (a request body adds `aborted` or `close`). */
  constructor(stream: Readable, maxBytes: number, failOn: readonly string[] = ['error']) {
    this.#stream = stream;
    this.#maxBytes = maxBytes;
    this.#failOn = failOn;
    this.done = new Promise((resolve) => (this.#settle = resolve));
    stream.on('data', this.#onData);
    stream.once('end', this.#onEnd);
    for (const event of failOn) stream.once(event, this.#onFailed);
  }

  /** The bytes read so far. */
  get size(): number {
    return this.#size;
  }

  /** Stops listening (the stream is left as it is); `done` never settles. */
  stop(): void {
    this.#stream.off('data', this.#onData);
    this.#stream.off('end', this.#onEnd);
    for (const event of this.#failOn) this.#stream.off(event, this.#onFailed);
  }

  #finish(read: CappedRead): void {
    this.stop();
    this.#settle(read);
  }

  readonly #onData = (chunk: Buffer): void => {
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    if (this.#size <= this.#maxBytes) return;
    this.#stream.pause();
    this.#finish({ kind: 'over', chunks: this.#chunks, size: this.#size });
  };

  readonly #onEnd = (): void => this.#finish({ kind: 'read', chunks: this.#chunks, size: this.#size });

  readonly #onFailed = (error?: unknown): void => this.#finish({ kind: 'failed', error });
}

/** Reads `stream` to its end, or until it passes `maxBytes` (CappedReader). */
export function readCapped(stream: Readable, maxBytes: number, failOn?: readonly string[]): Promise<CappedRead> {
  return new CappedReader(stream, maxBytes, failOn).done;
}
