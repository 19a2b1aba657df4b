/**
 * GraphQL answers in the cache REST uses: the one place the GraphQL path touches the cache, the
 * coalescer and the tags, so that it reads as "look up, fly, store, purge".
 *
 *   lookup   L1 (synchronous), then L2 (every replica's answers)
 *   fly      one upstream exchange per key at a time: in process (single flight) and across
 *            replicas (the Redis flight lock REST uses: one replica fetches, the others read its entry)
 *   store    L1 and L2, filed under the answer's tags (src/cache/store/tags.ts); nothing is stored
 *            when a purge of one of its tags came while the query was upstream
 *   purge    every answer filed under some tags, on every replica
 *
 * An answer is a `CacheEntry` (status 200, Content-Type and X-GitHub-Media-Type, the body),
 * fresh for `graphql_cache_seconds` and never served stale: GraphQL answers carry no validators.
 */
import type { CacheResult } from '../../cache/rules/classify.js';
import type { CacheEntry, FetchedBy } from '../../cache/rules/entry.js';
import type { FreshnessPolicy } from '../../cache/rules/policy.js';
import type { CacheRequest, Keys } from '../../cache/rules/request.js';
import type { Directives } from '../../http/headers/fields.js';
import type { Coalescer } from '../../cache/store/coalesce.js';
import type { TaggedAbout, TagStore } from '../../cache/store/tags.js';
import type { Cache, Found } from '../../cache/store/cache.js';
import type { Logger } from '../../platform/log/logger.js';
import type { SpanHandle } from '../../platform/trace/tracing.js';

/** The one key of a GraphQL request (no per-token keys: a non-equivalent pool caches nothing). */
class GraphqlKeys implements Keys {
  readonly perToken = false;
  readonly membersGeneration = 0;
  readonly candidateTokens: readonly (string | undefined)[] = [undefined];
  readonly candidates: readonly string[];
  constructor(
    readonly flight: string,
    readonly partition: string,
  ) {
    this.candidates = [flight];
  }
  store(): string {
    return this.flight;
  }
  isMemberKey(): boolean {
    return false;
  }
}

/** A GraphQL query as the cache and the coalescer see it: one key, on the upstream's `/graphql`. */
export class GraphqlCacheRequest implements CacheRequest {
  readonly keys: Keys;
  readonly pathname = '/graphql';
  readonly method = 'GET' as const;
  constructor(
    key: string,
    partition: string,
    readonly upstream: string,
    readonly credential: CacheRequest['credential'],
    readonly policy: FreshnessPolicy,
    readonly directives: Readonly<Directives>,
    readonly header: (name: string) => string | undefined,
  ) {
    this.keys = new GraphqlKeys(key, partition);
  }
}

type EntryResult = Extract<CacheResult, { kind: 'entry' }>;

/** An upstream answer as a flight's result: stored under `storeKey`, or not (`undefined`). */
export function answerResult(entry: CacheEntry, storeKey: string | undefined, token: string | undefined): EntryResult {
  return { kind: 'entry', entry, fwdStatus: entry.status, storeKey, dropKey: undefined, transient: false, token };
}

/** The freshness of an upstream's GraphQL answers: `graphql_cache_seconds`, never stale. */
export function graphqlPolicy(seconds: number): FreshnessPolicy {
  return { kind: 'ttl', ttl: seconds, maxAgeCap: undefined, staleIfError: 0, staleWhileRevalidate: 0, heuristicFraction: 0 };
}

/** What a stored answer is made of. */
export interface Answered {
  readonly status: number;
  readonly headers: Array<[string, string]>;
  readonly body: Buffer;
  /** When the query went upstream and when its answer came (ms since epoch). */
  readonly requestTime: number;
  readonly responseTime: number;
  readonly fetchedBy: FetchedBy;
}

export class GraphqlAnswers {
  readonly #cache: Cache;
  readonly #coalescer: Coalescer;
  readonly #tags: TagStore;
  readonly #logger: Logger;

  constructor(cache: Cache, coalescer: Coalescer, tags: TagStore, logger: Logger) {
    this.#cache = cache;
    this.#coalescer = coalescer;
    this.#tags = tags;
    this.#logger = logger;
  }

  /** This process's entry for the request, if any (synchronous: the hit path). */
  inL1(req: CacheRequest): CacheEntry | undefined {
    return this.#cache.usable(req, this.#cache.held(req));
  }

  /** Whether L2 is there to ask (a replica's answers are shared through it). */
  get shared(): boolean {
    return this.#cache.shared !== undefined;
  }

  async lookup(req: CacheRequest): Promise<Found> {
    const found = await this.#cache.lookup(req);
    return { entry: this.#cache.usable(req, found.entry), answered: found.answered };
  }

  /** Runs `fetch` unless a flight of the key is under way (here or on another replica): `joined` when this call waits on another's. */
  fly(
    req: CacheRequest,
    redisAnswered: boolean,
    fetch: () => Promise<CacheResult>,
    parent: SpanHandle | undefined,
    ahead?: CacheEntry,
  ): { promise: Promise<CacheResult>; joined: boolean } {
    return this.#coalescer.run(req, ahead, redisAnswered, fetch, parent, ahead !== undefined);
  }

  /** An answer as an entry of the request's policy (for the calls coalesced on it, stored or not). */
  entryOf(req: CacheRequest, answered: Answered): CacheEntry {
    const pair = this.#cache.headerTable.pair;
    return {
      status: answered.status,
      headers: answered.headers.map(([name, value]) => pair(name, value)),
      body: answered.body,
      decodedSize: answered.body.length,
      etag: undefined,
      lastModified: undefined,
      storedAt: answered.responseTime,
      initialAge: 0,
      currentAt: answered.requestTime,
      lifetime: req.policy.ttl,
      staleIfError: 0,
      staleWhileRevalidate: 0,
      mustRevalidate: true,
      fetchedBy: answered.fetchedBy,
      vary: null,
    };
  }

  /**
   * Stores `entry` under the request's key, filed under `tags`, unless a purge of one of them came
   * since `sentAt` (the answer may predate the change). Returns whether it was stored.
   */
  store(req: CacheRequest, entry: CacheEntry, tags: readonly string[], sentAt: number, about: TaggedAbout): boolean {
    if (this.#tags.purgedSince(tags, sentAt)) return false;
    const key = req.keys.flight;
    this.#cache.apply(answerResult(entry, key, undefined), sentAt, req);
    this.#tags.file(key, tags, req.policy.ttl * 1000, sentAt, about, this.#cache.written(key)).then(
      (kept) => {
        if (!kept) this.#cache.apply({ ...answerResult(entry, undefined, undefined), dropKey: key });
      },
      (err: unknown) => this.#logger.warn({ err: (err as Error).message }, 'filing a GraphQL answer failed'),
    );
    return true;
  }

  /**
   * An answer read from L2 (another replica stored it), held here under its tags so that a purge
   * notice drops this process's copy too; undefined (and dropped here) when a purge of one of them
   * came after the answer was fetched. `tags`: undefined when the body does not give them.
   */
  adopt(req: CacheRequest, entry: CacheEntry, tags: readonly string[] | undefined): CacheEntry | undefined {
    if (tags === undefined) return entry;
    const key = req.keys.flight;
    const until = entry.storedAt + entry.lifetime * 1000;
    if (this.#tags.hold(key, tags, until, entry.currentAt ?? entry.storedAt)) return entry;
    this.#cache.l1?.delete(key);
    return undefined;
  }

  /** Drops every answer filed under one of `tags`, on every replica; resolves with how many. */
  purge(tags: readonly string[]): Promise<number> {
    return tags.length === 0 ? Promise.resolve(0) : this.#tags.purge(tags);
  }
}
