/**
 * The cached request path for GET and HEAD:
 *   key -> L1 -> decide (fresh / stale / revalidate) -> single flight -> upstream (conditional)
 *   -> classify (200 store, 304 merge, error) -> respond.
 * The rules themselves are pure and live in src/cache (key.ts, policy.ts, cache-control.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Config } from '../config/schema.js';
import type { Unavailable } from '../tokens/pool.js';
import { parseCacheControl, requestDirectives, type Directives } from '../cache/cache-control.js';
import type { CacheEntry } from '../cache/entry.js';
import { ANONYMOUS, POOL, cacheKey, createPartitioner, pathScope, varyMatches, varySelection, type KeyInput, type Partitioner } from '../cache/key.js';
import { createDisabledStore, createMemoryStore, type MemoryStore } from '../cache/memory-store.js';
import {
  corruptBody,
  currentAge,
  decide,
  freshnessLifetime,
  initialAge,
  mergeHeaders,
  notStorableReason,
  retentionSeconds,
  staleWindows,
  usableOnError,
} from '../cache/policy.js';
import { createSingleFlight, type SingleFlight } from '../cache/single-flight.js';
import { cacheStatus, type CacheStatusInput } from '../headers/cache-status.js';
import { headerReader, headerValue } from '../headers/value.js';
import { requestHeadersForUpstream, responseHeadersForClient } from '../headers/hop-by-hop.js';
import type { Logger } from '../log/logger.js';
import type { Metrics } from '../metrics/registry.js';
import type { Fetched, UpstreamHeaders } from '../upstream/fetch.js';
import type { UpstreamFailure } from '../upstream/client.js';
import { errors, sendError } from './errors.js';
import type { Exchange } from './exchange.js';
import { forward, streamTo } from './forward.js';
import type { RedisStore } from '../cache/redis-store.js';
import type { FlightLock } from '../redis/flight-lock.js';
import type { InvalidationBus } from '../redis/invalidation-bus.js';
import { fetchPooled, type PoolContext } from './pooled-fetch.js';
import { isRateLimitHeader, type PoolHeaders } from './pool-headers.js';
import { rewriteLinkHeaders, sendEntry, type LinkSettings } from './respond.js';

/** What one upstream exchange produced, shared by every coalesced caller. */
type FlightResult =
  | {
      kind: 'entry';
      entry: CacheEntry;
      /** Upstream status of this exchange (304 when a stored entry was confirmed). */
      fwdStatus: number;
      stored: boolean;
      /** The upstream answered with a transient failure (5xx, 429, rate-limited 403). */
      transient: boolean;
      /** Another replica fetched it (distributed single flight): served from L2. */
      peer?: boolean;
    }
  | { kind: 'failed'; failure: UpstreamFailure }
  | { kind: 'too-large' }
  /** No pool token could take the request (every one spent, paused or dead; or no slot in time). */
  | { kind: 'unavailable'; reason: Unavailable; retryAfterSeconds: number };

/** The key a request is coalesced under, and the key a response is stored under once its token is known. */
interface Keys {
  flight: string;
  store(token: string | undefined): string;
}

/** The Redis side of the cache, when Redis is configured: L2, the flight lock, the invalidation bus. */
export interface SharedCache {
  readonly l2: RedisStore;
  readonly lock: FlightLock;
  /** How long a replica waits for another one's fetch before fetching itself. */
  readonly waitMs: number;
  /** Set once the bus exists (it needs the cache's handlers). */
  bus: InvalidationBus | undefined;
}

export interface HttpCache {
  readonly links: LinkSettings;
  readonly l1: MemoryStore;
  readonly flights: SingleFlight<FlightResult>;
  readonly partitioner: Partitioner;
  readonly poolHeaders: PoolHeaders | undefined;
  /** Serves a GET/HEAD on a caching upstream. */
  serve(x: Exchange): void;
  /** Forgets every stored response for a path (after a successful unsafe method). */
  invalidatePath(upstream: string, pathname: string): void;
  /** Handlers for notices from other replicas (redis/invalidation-bus.ts). */
  readonly remote: {
    entry(key: string, storedAt: number): void;
    dropped(key: string): void;
    path(scope: string, at: number): void;
  };
}

/** Request headers never forwarded on cached fetches: the cache sets its own validators. */
const CACHE_OWNED = new Set(['if-none-match', 'if-modified-since', 'if-match', 'if-unmodified-since', 'if-range', 'range', 'cache-control', 'pragma', 'accept-encoding']);

const MAX_INVALIDATIONS = 10_000;


function parseDate(v: string | string[] | undefined): number | undefined {
  const s = headerValue(v);
  if (s === undefined) return undefined;
  const t = Date.parse(s);
  return Number.isNaN(t) ? undefined : t;
}

/**
 * Stored headers: end-to-end, no framing, no Age (computed at serve time), lower-case. A response
 * fetched with a pool token keeps no x-ratelimit-*: consumers see the pool's, added at serve time.
 */
function storedHeaders(upstream: UpstreamHeaders, pooled: boolean): Array<[string, string]> {
  const h = responseHeadersForClient(upstream);
  const out: Array<[string, string]> = [];
  for (const name in h) {
    const v = h[name];
    if (v === undefined || name === 'content-length' || name === 'age') continue;
    if (pooled && isRateLimitHeader(name)) continue;
    if (Array.isArray(v)) for (const item of v) out.push([name, item]);
    else out.push([name, v]);
  }
  return out;
}

function headerOf(list: ReadonlyArray<[string, string]>, name: string): string | undefined {
  let found: string | undefined;
  for (const [k, v] of list) if (k === name) found = found === undefined ? v : `${found}, ${v}`;
  return found;
}

/** Upstream statuses after which a stored entry is still the best answer (stale-if-error). */
function isTransient(status: number, h: UpstreamHeaders): boolean {
  if (status >= 500) return true;
  if (status === 429) return true;
  return status === 403 && (headerValue(h['x-ratelimit-remaining']) === '0' || h['retry-after'] !== undefined);
}

/** The pool token that stored an entry, from its `fetchedBy` ("pool:<name>"). */
function poolTokenOf(fetchedBy: string | undefined): string | undefined {
  return fetchedBy !== undefined && fetchedBy.startsWith('pool:') ? fetchedBy.slice(5) : undefined;
}

export function createHttpCache(config: Config, logger: Logger, metrics: Metrics, poolCtx?: PoolContext, shared?: SharedCache): HttpCache {
  const pool = poolCtx?.pool;
  const poolHeaders = poolCtx?.headers;
  const l1 = !config.cache.l1 ? createDisabledStore() : createMemoryStore({
    maxBytes: config.cache.max_bytes,
    maxEntryBytes: config.cache.max_entry_bytes,
    onEvict: () => metrics.cacheEvictions.inc(),
  });
  const flights = createSingleFlight<FlightResult>();
  metrics.watchCache({ l1Entries: () => l1.size, l1Bytes: () => l1.bytes, waiters: () => flights.waiters });
  const partitioner = createPartitioner(config.cache.partition_secret ?? randomBytes(32));
  const invalidations = new Map<string, number>();
  const links: LinkSettings = { publicUrl: config.public_url, trustForwarded: config.trust_forwarded };
  const maxEntry = config.cache.max_entry_bytes;
  /** Headers added for pool consumers: the pool's x-ratelimit-* and the token's name. */
  const extraFor = (x: Exchange, e: CacheEntry): readonly string[] | undefined =>
    x.cred.kind === 'pool' && poolHeaders !== undefined ? poolHeaders.flat(poolTokenOf(e.fetchedBy)) : undefined;

  const markInvalidated = (scope: string, at: number): void => {
    invalidations.delete(scope);
    invalidations.set(scope, at);
    if (invalidations.size > MAX_INVALIDATIONS) {
      const oldest = invalidations.keys().next();
      if (!oldest.done) invalidations.delete(oldest.value);
    }
  };

  const isInvalidated = (upstream: string, pathname: string, e: CacheEntry): boolean => {
    if (invalidations.size === 0) return false;
    const at = invalidations.get(pathScope(upstream, pathname));
    return at !== undefined && e.storedAt <= at;
  };

  /** Pending L2 writes by key: a flight lock is released only once its entry is readable in L2. */
  const writes = new Map<string, Promise<void>>();

  /** Keeps an entry in L1 and L2, then tells other replicas (their older L1 copies drop). */
  const store = (key: string, e: CacheEntry): void => {
    const ttlMs = retentionSeconds(e) * 1000;
    l1.set(key, e, ttlMs);
    if (shared !== undefined) {
      const write = shared.l2.set(key, e, ttlMs).then(
        () => shared.bus?.written(key, e.storedAt),
        () => undefined,
      );
      writes.set(key, write);
      void write.finally(() => {
        if (writes.get(key) === write) writes.delete(key);
      });
    }
  };

  const drop = (key: string): void => {
    l1.delete(key);
    if (shared !== undefined) {
      shared.l2.delete(key).then(
        () => shared.bus?.dropped(key),
        () => undefined,
      );
    }
  };

  /**
   * An entry read from L2 goes into L1 for what is left of its retention, with its body copied
   * out of the Redis reply buffer so the L1 copy pins nothing larger than itself.
   */
  const promote = (key: string, e: CacheEntry): void => {
    if (!config.cache.l1) return;
    const ttlMs = e.storedAt + retentionSeconds(e) * 1000 - Date.now();
    if (ttlMs > 0) l1.set(key, { ...e, body: Buffer.from(e.body) }, ttlMs);
  };

  /**
   * Freshness of a response whose stored headers are `headers`, received as `f` (RFC 9111 4.2):
   * the same derivation for a new entry and for one a 304 refreshed.
   */
  const freshness = (x: Exchange, headers: ReadonlyArray<[string, string]>, res: Readonly<Directives>, f: Extract<Fetched, { kind: 'response' }>) => {
    const ageHeader = Number(headerValue(f.headers.age));
    return {
      storedAt: f.responseTime,
      initialAge: initialAge(Number.isFinite(ageHeader) ? ageHeader : undefined, parseDate(f.headers.date), f.requestTime, f.responseTime),
      lifetime: freshnessLifetime(x.upstream.policy, {
        res,
        date: parseDate(headerOf(headers, 'date')),
        expires: parseDate(headerOf(headers, 'expires')),
        lastModified: parseDate(headerOf(headers, 'last-modified')),
      }),
      ...staleWindows(x.upstream.policy, res),
    };
  };

  /** Builds an entry from a fresh upstream response (status, headers, body, freshness). */
  const entryFrom = (
    x: Exchange,
    f: Extract<Fetched, { kind: 'response' }>,
    res: Readonly<Directives>,
    fetchedBy: string,
    vary: Record<string, string> | null,
  ): CacheEntry => {
    const headers = storedHeaders(f.headers, x.cred.kind === 'pool');
    return {
      status: f.status,
      headers,
      body: f.body,
      etag: headerOf(headers, 'etag'),
      lastModified: headerOf(headers, 'last-modified'),
      ...freshness(x, headers, res, f),
      fetchedBy,
      vary,
    };
  };

  /** A 304 confirmed `e`: merge its headers and restart the freshness clock (RFC 9111 4.3.4). */
  const refreshed = (x: Exchange, e: CacheEntry, f: Extract<Fetched, { kind: 'response' }>, fetchedBy: string): CacheEntry => {
    const headers = mergeHeaders(e.headers, storedHeaders(f.headers, x.cred.kind === 'pool'));
    return {
      ...e,
      fetchedBy,
      headers,
      etag: headerOf(headers, 'etag') ?? e.etag,
      lastModified: headerOf(headers, 'last-modified') ?? e.lastModified,
      ...freshness(x, headers, parseCacheControl(headerOf(headers, 'cache-control')), f),
    };
  };

  /** One upstream exchange for `key`; `x` is the caller that started it (it streams too-large bodies). */
  const fetchForCache = async (
    x: Exchange | undefined,
    leader: Exchange,
    keys: Keys,
    stale: CacheEntry | undefined,
    reqDir: Readonly<Directives>,
  ): Promise<FlightResult> => {
    const headers = requestHeadersForUpstream(leader.req.headers);
    for (const name of CACHE_OWNED) delete headers[name];
    headers['x-request-id'] = leader.id;
    if (stale?.etag !== undefined) headers['if-none-match'] = stale.etag;
    else if (stale?.lastModified !== undefined) headers['if-modified-since'] = stale.lastModified;

    const pooled = leader.cred.kind === 'pool' ? pool : undefined;
    // A revalidation goes to the token that stored the entry: its ETag only matches that credential.
    const p = await fetchPooled(leader.upstream.client, { method: 'GET', path: leader.path, headers }, maxEntry, pooled, poolTokenOf(stale?.fetchedBy));
    if (p.kind === 'unavailable') return p;
    const { f, token } = p;
    if (p.switched) metrics.tokenSwitchRevalidations.inc();
    if (x !== undefined) x.token = token;
    const fetchedBy = token !== undefined ? `pool:${token}` : fetchedByOf(leader.req.headers.authorization);
    const key = keys.store(token);
    metrics.countUpstream(
      leader.upstream.cfg.name,
      leader.route,
      f.kind === 'failed' ? 'error' : f.status,
      f.kind === 'response' ? (f.responseTime - f.requestTime) / 1000 : undefined,
    );
    if (f.kind === 'failed') {
      logger.warn({ reqId: leader.id, upstream: leader.upstream.cfg.name, err: f.failure.detail }, 'upstream request failed');
      return f;
    }
    if (f.kind === 'too-large') {
      if (x !== undefined) {
        x.upstreamStatus = f.status;
        const out = responseHeadersForClient(f.headers);
        out['x-request-id'] = x.id;
        out['cache-status'] = cacheStatus({ fwd: 'miss', fwdStatus: f.status, detail: 'too-large' });
        if (pooled !== undefined) poolHeaders?.apply(out, token);
        rewriteLinkHeaders(x, out, links);
        x.res.writeHead(f.status, out);
        if (x.method === 'HEAD') {
          // The fetch was a GET (entries serve both), but a HEAD answer is complete with its
          // headers: it goes out now, and the body, which it would never carry, is dropped.
          // Streamed into the HEAD response, that body held the answer back until its last byte
          // (Node sends a HEAD's headers at end()), and an upstream failing in the middle of it
          // cut a connection whose answer needed none of it.
          x.res.end();
          f.rest.destroy(); // fetchBuffered left an error listener on it
        } else {
          for (const chunk of f.head) x.res.write(chunk);
          streamTo(f.rest, x.res, (err) => logger.warn({ reqId: x.id, err: (err as Error).message }, 'upstream body failed'));
        }
      } else {
        f.rest.destroy(); // fetchBuffered left an error listener on it
      }
      return { kind: 'too-large' };
    }
    if (f.status === 304 && stale !== undefined) {
      const merged = refreshed(leader, stale, f, fetchedBy);
      store(key, merged);
      return { kind: 'entry', entry: merged, fwdStatus: 304, stored: true, transient: false };
    }
    if (corruptBody(f.status, headerValue(f.headers['content-type']), f.body)) {
      logger.warn({ reqId: leader.id, upstream: leader.upstream.cfg.name, status: f.status }, 'upstream body is not valid JSON');
      return { kind: 'failed', failure: { status: 502, detail: 'invalid JSON body' } };
    }
    const reader = headerReader(leader.req.headers);
    const vary = varySelection(headerValue(f.headers.vary), reader);
    const res = parseCacheControl(f.headers['cache-control']);
    const candidate = entryFrom(leader, f, res, fetchedBy, vary ?? null);
    const reason = f.status === 304 ? 'unsolicited-304' : notStorableReason(leader.upstream.policy, {
      status: f.status,
      method: leader.method,
      req: reqDir,
      res,
      authorized: leader.cred.kind !== 'anonymous',
      hasValidator: candidate.etag !== undefined || candidate.lastModified !== undefined,
      hasExpires: f.headers.expires !== undefined,
      hasSetCookie: f.headers['set-cookie'] !== undefined,
      varyStar: vary === undefined,
    });
    const transient = isTransient(f.status, f.headers);
    if (reason === null) {
      store(key, candidate);
      return { kind: 'entry', entry: candidate, fwdStatus: f.status, stored: true, transient: false };
    }
    // A changed or vanished resource replaces the old entry even when the new answer is not
    // storable; a transient failure (or a credential error) never evicts it.
    if (stale !== undefined && !transient && (f.status < 400 || f.status === 404 || f.status === 410)) drop(key);
    return { kind: 'entry', entry: candidate, fwdStatus: f.status, stored: false, transient };
  };

  const serveStale = (x: Exchange, e: CacheEntry, fwdStatus: number): void => {
    x.outcome = 'stale';
    const age = currentAge(e, Date.now());
    sendEntry(x, e, cacheStatus({ fwd: 'stale', fwdStatus, ttl: e.lifetime - age, detail: 'stale-if-error' }), age, links, extraFor(x, e));
  };

  /** No pool token could be used: a stored entry if any (saying why), else 429 or 503. */
  const poolUnavailable = (x: Exchange, r: Extract<FlightResult, { kind: 'unavailable' }>, stale: CacheEntry | undefined): void => {
    const detail = `pool-${r.reason}`;
    if (stale !== undefined && usableOnError(stale, Date.now())) {
      x.outcome = 'stale';
      const age = currentAge(stale, Date.now());
      sendEntry(x, stale, cacheStatus({ hit: true, ttl: stale.lifetime - age, detail }), age, links, extraFor(x, stale));
      return;
    }
    x.outcome = 'error';
    errors.poolUnavailable(x.res, r.reason, r.retryAfterSeconds, {
      ...poolHeaders?.record(),
      'cache-status': cacheStatus({ fwd: 'miss', detail }),
      'x-request-id': x.id,
    });
  };

  const deliver = (x: Exchange, r: FlightResult, joined: boolean, stale: CacheEntry | undefined, forced: boolean): void => {
    if (r.kind === 'too-large') {
      // Only the caller that started the flight gets here (it has streamed the body); a joiner
      // fetches for itself (see `proceed`).
      x.outcome = 'bypass';
      return;
    }
    if (r.kind === 'unavailable') {
      poolUnavailable(x, r, stale);
      return;
    }
    if (r.kind === 'failed') {
      if (stale !== undefined && usableOnError(stale, Date.now())) {
        serveStale(x, stale, r.failure.status);
        return;
      }
      x.outcome = 'error';
      errors.upstreamFailed(x.res, x.upstream.cfg.name, r.failure);
      return;
    }
    if (r.peer === true) {
      // Another replica fetched it (distributed single flight): a hit on what it stored in L2.
      x.outcome = 'coalesced';
      const age = currentAge(r.entry, Date.now());
      sendEntry(x, r.entry, cacheStatus({ hit: true, ttl: r.entry.lifetime - age, detail: 'l2-collapsed' }), age, links, extraFor(x, r.entry));
      return;
    }
    x.upstreamStatus = r.fwdStatus;
    if (r.transient && stale !== undefined && usableOnError(stale, Date.now())) {
      serveStale(x, stale, r.fwdStatus);
      return;
    }
    const cs: CacheStatusInput = {
      fwd: forced ? 'request' : stale !== undefined ? 'stale' : 'miss',
      fwdStatus: r.fwdStatus,
      stored: r.stored,
      collapsed: joined,
    };
    x.outcome = joined ? 'coalesced' : r.fwdStatus === 304 ? 'revalidated' : r.transient ? 'error' : 'miss';
    const age = currentAge(r.entry, Date.now());
    if (r.stored) cs.ttl = r.entry.lifetime - age;
    sendEntry(x, r.entry, cacheStatus(cs), age, links, extraFor(x, r.entry));
  };

  /** The partition of a request's credential (the pool is one partition when its tokens are equivalent). */
  const partitionFor = (x: Exchange): string => {
    switch (x.cred.kind) {
      case 'pool':
        return POOL;
      case 'anonymous':
        return ANONYMOUS;
      case 'client':
        return partitioner.partitionOf(x.req.headers.authorization);
    }
  };

  /**
   * Keys and stored entry for a request. Non-equivalent pool tokens each have a partition: every
   * token's entry is looked at, a fresh one wins, and a new response is stored under its token's.
   */
  const lookup = (x: Exchange, k: KeyInput): { keys: Keys; entry: CacheEntry | undefined; candidates: readonly string[] } => {
    if (x.cred.kind !== 'pool' || pool === undefined || pool.equivalent) {
      const key = cacheKey(k);
      const entry = l1.get(key);
      return { keys: { flight: key, store: () => key }, entry, candidates: entry === undefined ? [key] : [] };
    }
    const keyOf = (token: string | undefined): string => cacheKey({ ...k, partition: `${POOL}:${token ?? '*'}` });
    let entry: CacheEntry | undefined;
    const now = Date.now();
    const fresh = (e: CacheEntry): boolean => currentAge(e, now) < e.lifetime;
    for (const name of pool.names) {
      const e = l1.get(keyOf(name));
      if (e === undefined) continue;
      const better = entry === undefined || (fresh(e) ? !fresh(entry) || e.storedAt > entry.storedAt : !fresh(entry) && e.storedAt > entry.storedAt);
      if (better) entry = e;
    }
    return { keys: { flight: keyOf(undefined), store: keyOf }, entry, candidates: pool.names.map(keyOf) };
  };

  /**
   * One upstream exchange for a miss, coordinated across replicas when Redis is there: the lock
   * winner fetches; the others serve what it stored in L2, or fetch themselves when it is gone
   * without storing anything or their wait runs out.
   */
  const fetchOnce = async (x: Exchange | undefined, leader: Exchange, keys: Keys, stale: CacheEntry | undefined, reqDir: Readonly<Directives>, redisAnswered: boolean): Promise<FlightResult> => {
    // Redis did not answer this request's L2 lookup (down, breaker open, or slower than
    // lookup_timeout_ms): the lock would wait on it too, so the request goes on without it.
    if (shared === undefined || !redisAnswered || stale !== undefined || keys.store(undefined) !== keys.flight) return fetchForCache(x, leader, keys, stale, reqDir);
    const key = keys.flight;
    /** Another replica's entry, found in L2: served as that replica's fetch. */
    const followed = (entry: CacheEntry): FlightResult => {
      metrics.flightLocks.inc({ result: 'followed' });
      promote(key, entry);
      return { kind: 'entry', entry, fwdStatus: entry.status, stored: false, transient: false, peer: true };
    };
    const lock = await shared.lock.acquire(key);
    if (lock.kind === 'won') {
      try {
        // Checked again under the lock: a winner that finished between our L2 miss and our lock
        // has left its entry in L2.
        const again = await shared.l2.lookup(key);
        if (again.kind === 'hit') return followed(again.entry);
        metrics.flightLocks.inc({ result: 'won' });
        return await fetchForCache(x, leader, keys, stale, reqDir);
      } finally {
        void (writes.get(key) ?? Promise.resolve()).finally(() => lock.release());
      }
    }
    if (lock.kind === 'lost') {
      const w = await shared.lock.waitFor(key, Date.now() + shared.waitMs);
      if (w.kind === 'entry') return followed(w.entry);
      metrics.flightLocks.inc({ result: w.kind === 'timeout' ? 'timeout' : w.kind === 'gone' ? 'gone' : 'unavailable' });
    } else {
      metrics.flightLocks.inc({ result: 'unavailable' });
    }
    return fetchForCache(x, leader, keys, stale, reqDir);
  };

  /** Serves from an entry found in L1 or L2, or goes upstream (the rest of `serve`). */
  const proceed = (x: Exchange, keys: Keys, found: CacheEntry | undefined, reqDir: Readonly<Directives>, reader: (name: string) => string | undefined, redisAnswered = true): void => {
    const now = Date.now();
    let entry = found;
    if (entry !== undefined && (!varyMatches(entry.vary, reader) || isInvalidated(x.upstream.cfg.name, x.pathname, entry))) {
      entry = undefined;
    }
    let forced = false;
    if (entry !== undefined) {
      const d = decide(entry, reqDir, now);
      if (d.kind === 'fresh') {
        x.outcome = 'hit';
        sendEntry(x, entry, cacheStatus({ hit: true, ttl: d.ttl }), d.age, links, extraFor(x, entry));
        return;
      }
      if (d.kind === 'stale') {
        x.outcome = 'stale';
        sendEntry(
          x,
          entry,
          cacheStatus({ hit: true, ttl: d.ttl, detail: d.background ? 'stale-while-revalidate' : 'max-stale' }),
          d.age,
          links,
          extraFor(x, entry),
        );
        if (d.background) {
          const stale = entry;
          const bg = flights.run(keys.flight, () => fetchForCache(undefined, x, keys, stale, reqDir));
          bg.promise.catch((err: unknown) => logger.error({ reqId: x.id, err: (err as Error).message }, 'background revalidation failed'));
        }
        return;
      }
      forced = d.forced;
    }
    if (reqDir.onlyIfCached) {
      x.outcome = 'miss';
      sendError(x.res, 504, 'Gateway Timeout: only-if-cached was requested and no usable response is stored', {
        'cache-status': cacheStatus({ fwd: 'miss', detail: 'only-if-cached' }),
      });
      return;
    }
    const stale = entry;
    const { promise, shared: joined } = flights.run(keys.flight, () => fetchOnce(x, x, keys, stale, reqDir, redisAnswered));
    const failed = (err: unknown): void => {
      logger.error({ reqId: x.id, err: (err as Error).message }, 'cache fetch failed');
      x.outcome = 'error';
      errors.badGateway(x.res, x.upstream.cfg.name, 'internal error');
    };
    promise.then((r) => {
      if (r.kind === 'too-large' && joined) {
        // The flight's body was over the entry cap: it went to the caller that started the flight
        // and nothing was stored. A joiner fetches for itself, through this same path rather than
        // a plain streamed forward: its answer is read up to the cap before anything goes out, so
        // a fault on this second exchange is a 502/504 (or the stale entry), never a body cut
        // after its headers or an invalid JSON body passed on; only a body that is again over the
        // cap is streamed (and cut if the upstream fails in the middle of it).
        if (x.res.destroyed) return; // the client has gone: nothing to fetch for
        fetchForCache(x, x, keys, stale, reqDir).then((own) => deliver(x, own, false, stale, forced), failed);
        return;
      }
      deliver(x, r, joined, stale, forced);
    }, failed);
  };

  /** L1 missed: look in L2 (every candidate key), promote what is found, then proceed. */
  const fromL2 = (x: Exchange, keys: Keys, candidates: readonly string[], reqDir: Readonly<Directives>, reader: (name: string) => string | undefined): void => {
    const l2 = shared!.l2;
    const lookups = candidates.length === 1 ? l2.lookup(candidates[0]!).then((r) => [r]) : Promise.all(candidates.map((k) => l2.lookup(k)));
    lookups.then(
      (found) => {
        let entry: CacheEntry | undefined;
        found.forEach((r, i) => {
          if (r.kind !== 'hit') return;
          promote(candidates[i]!, r.entry);
          if (entry === undefined || r.entry.storedAt > entry.storedAt) entry = r.entry;
        });
        proceed(x, keys, entry, reqDir, reader, found.every((r) => r.kind !== 'skipped'));
      },
      (err: unknown) => {
        logger.error({ reqId: x.id, err: (err as Error).message }, 'L2 lookup failed');
        proceed(x, keys, undefined, reqDir, reader, false);
      },
    );
  };

  const serve = (x: Exchange): void => {
    const h = x.req.headers;
    if (h.range !== undefined) {
      forward(x, links, logger, metrics, poolCtx);
      return;
    }
    const reqDir = requestDirectives(h['cache-control'], h.pragma);
    const reader = headerReader(h);
    const { keys, entry, candidates } = lookup(x, {
      upstream: x.upstream.cfg.name,
      pathname: x.pathname,
      search: x.search,
      accept: headerValue(h.accept),
      apiVersion: headerValue(h['x-github-api-version']),
      partition: partitionFor(x),
      selecting: partitioner.selectingDigest(reader),
    });
    if (entry === undefined && shared !== undefined) {
      fromL2(x, keys, candidates, reqDir, reader);
      return;
    }
    proceed(x, keys, entry, reqDir, reader);
  };

  const fetchedByOf = (authorization: string | undefined): string =>
    authorization === undefined ? ANONYMOUS : `cred:${partitioner.credentialId(authorization)}`;

  return {
    links,
    l1,
    flights,
    partitioner,
    poolHeaders,
    serve,
    invalidatePath(upstream, pathname) {
      const at = Date.now();
      const scope = pathScope(upstream, pathname);
      markInvalidated(scope, at);
      shared?.bus?.path(scope, at);
    },
    remote: {
      entry(key, storedAt) {
        const e = l1.get(key);
        if (e !== undefined && e.storedAt < storedAt) l1.delete(key);
      },
      dropped(key) {
        l1.delete(key);
      },
      path(scope, at) {
        markInvalidated(scope, at);
      },
    },
  };
}
