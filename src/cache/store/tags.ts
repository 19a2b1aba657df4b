/**
 * Tags: names an entry is purged by, beside its key. A GraphQL answer is filed under the
 * repositories, owners and node ids it shows (src/cache/rules/graphql-tags.ts), a stored 404 under
 * the repository or owner of its path (src/cache/rules/entry.ts); a webhook delivery, a mutation
 * or /admin/purge purges a tag, and every entry filed under it is dropped, in L1 and L2, on every
 * replica.
 *
 *   here     tag -> keys and key -> tags of the entries this process filed (bounded), and the tags
 *            purged lately (bounded, PURGE_MEMORY_MS): an exchange that went upstream before a
 *            purge of one of its tags stores nothing (its answer may predate the change)
 *   Redis    <prefix>tag:{<hash>}          the keys filed under a tag (a set, kept as long as its longest entry)
 *            <prefix>tag:{<hash>}:purged   when the tag was last purged (ms), for PURGE_MEMORY_MS
 *            <prefix>{<key hash>}:tags     an entry's tags and what it is, for `cache inspect --graphql`
 *   bus      <prefix>tags, "t <replica> <at> <tag>\t<tag>...\n<key>\t<key>...": the tags purged and
 *            the keys dropped; each replica drops those keys and its own entries under the tags
 *
 * Filing and purging a tag in Redis are each one script on the tag's slot: a purge either comes
 * first (the filing sees when it was made, and its entry is dropped) or sees the key (and drops
 * it). A purge is compared with when the exchange went upstream less PURGE_MARGIN_MS, so that
 * replicas' clocks a little apart still drop an answer that may predate it.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from '../../platform/log/logger.js';
import type { RedisConnection } from '../../platform/redis/connection.js';
import { keyTag } from './redis-store.js';
import type { Cache } from './cache.js';

/** What `cache inspect --graphql` shows of an entry besides its tags. */
export interface TaggedAbout {
  readonly upstream: string;
  /** A GraphQL operation's name (bounded), or a REST path. */
  readonly what: string;
  readonly partition: 'pool' | 'client' | 'anonymous';
}

export interface Filed {
  readonly tags: readonly string[];
  readonly about: TaggedAbout | undefined;
  /** When the filing runs out (ms since epoch): the entry's retention. */
  readonly until: number;
}

export interface TagStore {
  /** Whether a purge of one of `tags` this process knows of covers an exchange that went upstream at `since`. */
  purgedSince(tags: readonly string[], since: number): boolean;
  /**
   * Files `key` under `tags` for `ttlMs`: here at once, in Redis once `stored` (the entry's L2
   * write) is done. Resolves false when a purge of one of them covers an exchange that went
   * upstream at `since`: the caller drops the entry.
   */
  file(key: string, tags: readonly string[], ttlMs: number, since: number, about?: TaggedAbout, stored?: Promise<void>): Promise<boolean>;
  /**
   * Holds an entry this process took from L2 (another replica filed it) under `tags` here, so that
   * a purge notice naming the tags drops its L1 copy; false (and nothing held) when a purge of one
   * of them covers an entry last known current at `origin`.
   */
  hold(key: string, tags: readonly string[], until: number, origin: number): boolean;
  /** Purges every entry filed under one of `tags`, here, in L2 and on every replica; resolves with the keys dropped. */
  purge(tags: readonly string[]): Promise<number>;
  /** An entry's filing: this process's, else Redis's. */
  filed(key: string): Promise<Filed | undefined>;
  /** The keys this process filed, newest last (at most `limit`). */
  keys(limit: number): string[];
  /** Keys filed in this process. */
  readonly size: number;
  close(): void;
}

/** Purges are remembered this long: longer than any exchange stays upstream (timeouts are 30 s a step). */
export const PURGE_MEMORY_MS = 5 * 60_000;
/**
 * A purge up to this long before an exchange went upstream still covers it: a replica's purge is
 * timed by its own clock, the exchange by another's (NTP keeps them within milliseconds). An answer
 * fetched within this much after a purge is served but not stored.
 */
export const PURGE_MARGIN_MS = 100;
/** At most this many keys are filed in this process, and this many purged tags remembered. */
const MAX_FILED = 200_000;
const MAX_PURGED = 100_000;
/** A tag is at most this long (longer ones are cut: a tag names a repository, an owner or a node id). */
const MAX_TAG_CHARS = 256;

/** The tags as filed: each cut to MAX_TAG_CHARS (a cut tag only purges more); the same array when none is long. */
const bounded = (tags: readonly string[]): readonly string[] =>
  tags.some((tag) => tag.length > MAX_TAG_CHARS) ? tags.map((tag) => tag.slice(0, MAX_TAG_CHARS)) : tags;

/** Files `ARGV[1]` under the tag set KEYS[1] for at least ARGV[2] ms; returns when the tag was last purged (0: never). */
const FILE = `redis.call('sadd', KEYS[1], ARGV[1])
local left = redis.call('pttl', KEYS[1])
if left < tonumber(ARGV[2]) then redis.call('pexpire', KEYS[1], ARGV[2]) end
return tonumber(redis.call('get', KEYS[2]) or '0')`;

/** Notes the purge of the tag set KEYS[1] at ARGV[1] (for ARGV[2] ms) and empties it; returns the keys it held. */
const PURGE = `redis.call('set', KEYS[2], ARGV[1], 'PX', ARGV[2])
local keys = redis.call('smembers', KEYS[1])
redis.call('del', KEYS[1])
return keys`;

const tagHash = (tag: string): string => createHash('sha256').update(tag).digest('base64url').slice(0, 22);

/** Sets `key` as the newest of `map`, forgetting the oldest past `max`. */
function setNewest<V>(map: Map<string, V>, key: string, value: V, max: number, forget?: (key: string, value: V) => void): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) {
    const [oldest, gone] = map.entries().next().value!;
    map.delete(oldest);
    forget?.(oldest, gone);
  }
}

/** What this process filed and the tags purged lately: every map bounded, the oldest forgotten first. */
class LocalTags {
  readonly #byKey = new Map<string, Filed>();
  readonly #byTag = new Map<string, Set<string>>();
  readonly #purged = new Map<string, number>();

  get size(): number {
    return this.#byKey.size;
  }

  filed(key: string): Filed | undefined {
    const filed = this.#byKey.get(key);
    return filed !== undefined && filed.until > Date.now() ? filed : undefined;
  }

  keys(limit: number): string[] {
    const all = [...this.#byKey.keys()];
    return all.slice(Math.max(0, all.length - limit));
  }

  index(key: string, filed: Filed): void {
    // Filings run out oldest first (their entries' lives are alike): the head goes as it expires.
    for (const [oldest, held] of this.#byKey) {
      if (held.until > Date.now()) break;
      this.#forget(oldest, held);
    }
    const known = this.#byKey.get(key);
    if (known !== undefined) this.#forget(key, known);
    setNewest(this.#byKey, key, filed, MAX_FILED, (gone, held) => this.#unindex(gone, held));
    for (const tag of filed.tags) {
      let keys = this.#byTag.get(tag);
      if (keys === undefined) this.#byTag.set(tag, (keys = new Set()));
      keys.add(key);
    }
  }

  /** Whether a purge of one of `tags` remembered here covers an exchange that went upstream at `since`. */
  purgedSince(tags: readonly string[], since: number): boolean {
    if (this.#purged.size === 0) return false;
    const now = Date.now();
    for (const tag of tags) {
      const at = this.#purged.get(tag);
      if (at !== undefined && now - at <= PURGE_MEMORY_MS && coveredBy(at, since)) return true;
    }
    return false;
  }

  /** Remembers the purge of `tags` at `at`; returns the keys filed under them (and `keys`), forgotten here. */
  purge(tags: readonly string[], keys: readonly string[], at: number): Set<string> {
    const dropped = new Set(keys);
    for (const [tag, when] of this.#purged) {
      if (at - when <= PURGE_MEMORY_MS) break;
      this.#purged.delete(tag);
    }
    for (const tag of tags) {
      setNewest(this.#purged, tag, Math.max(at, this.#purged.get(tag) ?? 0), MAX_PURGED);
      for (const key of this.#byTag.get(tag) ?? []) dropped.add(key);
    }
    for (const key of dropped) {
      const filed = this.#byKey.get(key);
      if (filed !== undefined) this.#forget(key, filed);
    }
    return dropped;
  }

  #forget(key: string, filed: Filed): void {
    this.#byKey.delete(key);
    this.#unindex(key, filed);
  }

  #unindex(key: string, filed: Filed): void {
    for (const tag of filed.tags) {
      const keys = this.#byTag.get(tag);
      keys?.delete(key);
      if (keys?.size === 0) this.#byTag.delete(tag);
    }
  }
}

const coveredBy = (at: number, since: number): boolean => at >= since - PURGE_MARGIN_MS;

/** The Redis side: the tag sets, the purge times, the entries' filings and the bus. */
class SharedTags {
  readonly #redis: RedisConnection;
  readonly #channel: string;
  readonly #replica = randomBytes(6).toString('base64url');

  constructor(redis: RedisConnection) {
    this.#redis = redis;
    this.#channel = `${redis.prefix}tags`;
  }

  /** Hears other replicas' purges: `drop(tags, keys, at)`. */
  listen(logger: Logger, drop: (tags: string[], keys: string[], at: number) => void): () => void {
    const onMessage = (from: string, message: string): void => {
      if (from !== this.#channel) return;
      const match = /^t (\S+) (\d+) ([^\n]*)\n([\s\S]*)$/.exec(message);
      if (match === null || match[1] === this.#replica) return;
      const split = (text: string): string[] => (text.length === 0 ? [] : text.split('\t'));
      drop(split(match[3]!), split(match[4]!), Number(match[2]));
    };
    const sub = this.#redis.subscriber();
    sub
      .subscribe(this.#channel)
      .catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'redis subscribe failed (will retry on reconnect)'));
    sub.on('message', onMessage);
    return () => sub.off('message', onMessage);
  }

  /** Files `key` under each tag; resolves with when each tag was last purged (0: never; undefined: Redis did not answer). */
  file(key: string, tags: readonly string[], ttlMs: number, about: TaggedAbout | undefined): Promise<Array<number | undefined>> {
    const ms = Math.max(1, Math.ceil(ttlMs));
    void this.#redis.run('tag-about', (c) => c.set(this.#aboutKey(key), JSON.stringify({ tags, about }), 'PX', ms));
    return Promise.all(
      tags.map((tag) => {
        const set = this.#tagKey(tag);
        return this.#redis.run('tag-file', (c) => c.eval(FILE, 2, set, `${set}:purged`, key, ms) as Promise<number>);
      }),
    );
  }

  /** Notes the purge of `tags` at `at` and empties their sets; resolves with the keys they held. */
  async purge(tags: readonly string[], at: number): Promise<string[]> {
    const held = await Promise.all(
      tags.map((tag) => {
        const set = this.#tagKey(tag);
        return this.#redis.run('tag-purge', (c) => c.eval(PURGE, 2, set, `${set}:purged`, at, PURGE_MEMORY_MS) as Promise<string[]>);
      }),
    );
    return held.flatMap((found) => (Array.isArray(found) ? found : []));
  }

  /** Tells the other replicas: the tags purged and every key dropped. */
  announce(tags: readonly string[], keys: readonly string[], at: number): void {
    void this.#redis.run('publish', (c) => c.publish(this.#channel, `t ${this.#replica} ${at} ${tags.join('\t')}\n${keys.join('\t')}`));
  }

  async filed(key: string): Promise<Filed | undefined> {
    const found = await this.#redis.run('tag-about', (c) => Promise.all([c.get(this.#aboutKey(key)), c.pttl(this.#aboutKey(key))]));
    if (found === undefined || found[0] === null) return undefined;
    try {
      const value = JSON.parse(found[0]) as { tags?: unknown; about?: TaggedAbout };
      const tags = Array.isArray(value.tags) ? value.tags.filter((tag): tag is string => typeof tag === 'string') : [];
      return { tags, about: value.about, until: Date.now() + Math.max(0, found[1]) };
    } catch {
      return undefined;
    }
  }

  #tagKey(tag: string): string {
    return `${this.#redis.prefix}tag:{${tagHash(tag)}}`;
  }

  #aboutKey(key: string): string {
    return `${this.#redis.prefix}{${keyTag(key)}}:tags`;
  }
}

export function createTagStore(cache: Pick<Cache, 'l1' | 'shared'>, redis: RedisConnection | undefined, logger: Logger): TagStore {
  const local = new LocalTags();
  const shared = redis === undefined ? undefined : new SharedTags(redis);
  /** Drops from L1 what a purge names (filed here under its tags, or listed); returns the keys. */
  const dropHere = (tags: readonly string[], keys: readonly string[], at: number): Set<string> => {
    const dropped = local.purge(tags, keys, at);
    for (const key of dropped) cache.l1?.delete(key);
    return dropped;
  };
  const unlisten = shared?.listen(logger, dropHere);

  return {
    purgedSince: (tags, since) => local.purgedSince(bounded(tags), since),
    hold(key, given, until, origin) {
      const tags = bounded(given);
      if (local.purgedSince(tags, origin)) return false;
      if (local.filed(key) === undefined) local.index(key, { tags, about: undefined, until });
      return true;
    },
    async file(key, given, ttlMs, since, about, stored) {
      const tags = bounded(given);
      if (local.purgedSince(tags, since)) return false;
      local.index(key, { tags, about, until: Date.now() + ttlMs });
      if (shared === undefined) return true;
      await stored;
      const purgedAt = await shared.file(key, tags, ttlMs, about);
      // A purge Redis saw between the exchange and now (on any replica): the entry may predate it.
      const late = purgedAt.some((at) => at !== undefined && at > 0 && coveredBy(at, since));
      return !late && !local.purgedSince(tags, since);
    },
    async purge(given) {
      const tags = bounded(given);
      const at = Date.now();
      const dropped = dropHere(tags, [], at);
      if (shared === undefined) return dropped.size;
      for (const key of dropHere([], await shared.purge(tags, at), at)) dropped.add(key);
      const keys = [...dropped];
      await Promise.all(keys.map((key) => cache.shared?.l2.delete(key)));
      shared.announce(tags, keys, at);
      return dropped.size;
    },
    async filed(key) {
      return local.filed(key) ?? (await shared?.filed(key));
    },
    keys: (limit) => local.keys(limit),
    get size() {
      return local.size;
    },
    close() {
      unlisten?.();
    },
  };
}
