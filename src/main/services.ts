/**
 * Everything a proxy process serves with, built once from the config: the Redis connection, the
 * cache (L1, L2) and coalescing, the token pool, the upstreams and the consumers. The request handler
 * receives these and builds nothing; `close()` releases them in order.
 */
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { createHeaderTable } from '../cache/store/header-intern.js';
import { createCoalescer, type Coalescer } from '../cache/store/coalesce.js';
import { createTagStore, type TagStore } from '../cache/store/tags.js';
import { createRefreshScheduler, type RefreshScheduler } from '../cache/store/refresh-scheduler.js';
import { createPartitioner, type Partitioner } from '../cache/rules/key.js';
import { DEFAULT_MARK_SETTINGS } from '../cache/store/memory-store.js';
import { Cache } from '../cache/store/cache.js';
import type { Config, UpstreamConfig } from '../platform/config/schema.js';
import { consumerKeysFromFile } from '../platform/config/load.js';
import { type Logger, createLogMemo } from '../platform/log/logger.js';
import type { Metrics } from '../platform/metrics/registry.js';
import { createUpstreamRuntime, type UpstreamRuntime } from '../paths/upstreams.js';
import type { LinkSettings } from '../http/representation.js';
import type { PassThrough } from '../paths/context.js';
import { createPassThrough } from '../paths/pass-through/pass-through.js';
import { createGraphqlRuntime, type GraphqlRuntime } from '../paths/graphql/runtime.js';
import { type EntryForm, createRewrittenBodies } from '../cache/store/entry-form.js';
import { createRedisConnection, type RedisConnection } from '../platform/redis/connection.js';
import { consumerBudgetFor, type ConsumerBudget } from '../pool/consumers/consumer-budget.js';
import { consumerKeysOf, createConsumers, type Consumers } from '../pool/consumers/consumers.js';
import { createOidcVerifier, type OidcVerifier } from '../pool/consumers/oidc.js';
import { createPoolCredentials, type PoolCredentials } from '../pool/consumers/credential.js';
import type { BoundedMemo } from '../platform/bytes.js';
import { createRequestIds, type RequestIds } from '../http/target.js';
import { reloadWithoutPool, type ReloadOutcome, type ReloadTrigger } from '../pool/members/reload.js';
import type { AppTiming } from '../pool/members/app-members.js';
import { createPoolRuntime, type PoolRuntime } from '../pool/runtime.js';
import type { TokenPool } from '../pool/rules/types.js';
import { createWebhookReceiver, type WebhookReceiver } from '../paths/webhooks/receiver.js';
import { NO_TRACING, type Tracing } from '../platform/trace/tracing.js';

/** The decoded bodies of gzip entries may take up to this fraction of cache.max_bytes (within it). */
const DECODED_SHARE = 8;

export interface ServiceDeps {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** The GitHub App sources' clocks (tests only: src/pool/members/app-members.ts). */
  readonly appTiming?: AppTiming | undefined;
  /** The process's tracing (src/platform/trace/setup.ts); off when not given. */
  readonly tracing?: Tracing | undefined;
}

export interface HandlerMemos {
  /** The access log's quoted values (src/platform/log/logger.ts). */
  readonly accessLog: BoundedMemo;
  /** The consumers' pool credentials (src/pool/consumers/credential.ts). */
  readonly credentials: PoolCredentials;
}

/** An upstream's ways in besides the cached path. */
export interface Entrances {
  readonly passThrough: PassThrough | undefined;
  /** GitHub's GraphQL endpoint through the proxy, when `graphql: true` (src/paths/graphql/). */
  readonly graphql: GraphqlRuntime | undefined;
}

export interface Services {
  readonly redis: RedisConnection | undefined;
  /** L1 and L2, and what may still be used (src/cache/store/cache.ts, validity.ts). */
  readonly cache: Cache;
  readonly coalescer: Coalescer;
  /** What GraphQL answers and stored 404s are filed under, for purges by webhooks, mutations and /admin/purge. */
  readonly tags: TagStore;
  /** Refreshes ahead of expiry (cache.refresh_ahead), one schedule for every upstream. */
  readonly refreshAhead: RefreshScheduler;
  readonly partitioner: Partitioner;
  /** The token pool, when tokens or GitHub Apps are configured. */
  readonly pool: PoolRuntime | undefined;
  /** One runtime per configured upstream, in config order (the router's indexes). */
  readonly upstreams: readonly UpstreamRuntime[];
  /** Per upstream, in the same order: its ways in besides the cached path (pass-through, GraphQL), when configured. */
  readonly entrances: readonly Entrances[];
  /** Consumer access control, when enabled. */
  readonly consumers: Consumers | undefined;
  /** The trusted OIDC issuers' verifier, when consumers.oidc lists any (src/pool/consumers/oidc.ts). */
  readonly oidc: OidcVerifier | undefined;
  /** The fair share between consumers, when consumer access control is on and there is a pool. */
  readonly consumerBudget: ConsumerBudget | undefined;
  /** The webhook receiver, when a webhook secret is configured (src/paths/webhooks/). */
  readonly webhooks: WebhookReceiver | undefined;
  /** X-Request-Id values for requests without a sane one (src/http/target.ts). */
  readonly requestId: RequestIds;
  /** Spans of each request, or `NO_TRACING` (src/platform/trace/). */
  readonly tracing: Tracing;
  /** The request handler's memos (src/platform/bytes.ts), reported in etagere_cache_bytes. */
  readonly memos: HandlerMemos;
  /**
   * Agrees on the partition secret through Redis, mints the GitHub Apps' first installation tokens
   * and learns the pool members' numbers; never throws.
   */
  start(): Promise<void>;
  /** Reloads pool.tokens_file into the pool (src/pool/members/reload.ts); never throws. */
  reloadTokens(trigger: ReloadTrigger): Promise<ReloadOutcome>;
  close(): Promise<void>;
}

/**
 * The token pool of a process: shared through Redis when there is a connection and
 * redis.shared_tokens, else this process's own. `workerPool`: a cluster worker's IPC pool (the
 * primary owns the budget). The cluster primary calls this with no Redis to own the budget itself.
 */
export function buildPool(config: Config, deps: ServiceDeps, redis?: RedisConnection, workerPool?: TokenPool): PoolRuntime | undefined {
  return createPoolRuntime(config, deps.logger, deps.metrics, redis, workerPool, deps.appTiming);
}

export function buildServices(config: Config, deps: ServiceDeps, workerPool?: TokenPool): Services {
  const { logger, metrics } = deps;
  const tracing = deps.tracing ?? NO_TRACING;
  const redis = createRedisConnection(config.redis, logger, metrics);
  const runtime = buildPool(config, deps, redis, workerPool);
  // A worker leasing tokens from the primary counts 1/workers of each consumer's share.
  const workers = workerPool === undefined ? 1 : config.workers === 'auto' ? availableParallelism() : config.workers;
  const consumerBudget = consumerBudgetFor(config, deps, runtime, redis, workers);
  // The request path finds the fair share next to the pool it divides.
  const pool = runtime === undefined || consumerBudget === undefined ? runtime : { ...runtime, consumers: consumerBudget };
  // Decoded forms of gzip entries, for clients that do not take gzip: up to an eighth of
  // cache.max_bytes, counted within it (L1 gives way to them; an entry that leaves L1 takes its
  // form along), so a hot set is decoded once (src/cache/store/entry-form.ts; BENCHMARKS.md).
  const decodedForms = createRewrittenBodies<EntryForm>(Math.floor(config.cache.max_bytes / DECODED_SHARE), () => cache.l1?.fit());
  // Header fields common to many entries, held once for this process's cache (src/cache/store/header-intern.ts).
  const headerTable = createHeaderTable();
  const cache = new Cache(
    {
      l1: config.cache.l1,
      headerTable,
      maxBytes: config.cache.max_bytes,
      besideL1: decodedForms,
      maxEntryBytes: config.cache.max_entry_bytes,
      lockMs: config.redis.lock_ms,
      // Stale marks matter while an entry stored before them could still be fresh.
      marks: { ...DEFAULT_MARK_SETTINGS, horizonMs: 1000 * Math.max(3600, ...config.upstreams.map(longestFreshness)) },
    },
    metrics,
    logger,
    redis,
  );
  const coalescer = createCoalescer(cache, metrics, config.redis.wait_ms, tracing);
  const tags = createTagStore(cache, redis, logger);
  const refreshAhead = createRefreshScheduler();
  const partitioner = createPartitioner(config.cache.partition_secret ?? randomBytes(32));
  const links = { publicUrl: config.public_url, trustForwarded: config.trust_forwarded, https: config.listen.tls !== null };
  // Rewritten bodies are kept beside L1, bounded at an eighth of it (src/cache/store/entry-form.ts).
  const rewrittenBodies = createRewrittenBodies<EntryForm>(Math.floor(config.cache.max_bytes / 8));
  const upstreams = config.upstreams.map((cfg) =>
    createUpstreamRuntime(
      cfg,
      links,
      {
        rewritten: rewrittenBodies,
        decoded: decodedForms,
        maxDecodedBytes: config.cache.max_decoded_bytes ?? config.cache.max_entry_bytes,
      },
      config.cache.max_entry_bytes,
      config.webhooks.owners,
      tracing,
      (reason, outcome) => metrics.upstreamRetries.inc({ upstream: cfg.name, reason, outcome }),
    ),
  );
  const entrances = buildEntrances(config, upstreams, cache, links, tracing);
  metrics.watchCache({
    l1Entries: () => cache.l1?.size ?? 0,
    l1Bytes: () => cache.l1?.bytes ?? 0,
    waiters: () => coalescer.waiters,
    l1BodyBytes: () => cache.l1?.bodyBytes ?? { stored: 0, decoded: 0 },
    memoBytes: () => ({
      partition: partitioner.memoBytes,
      routes: upstreams.reduce((sum, rt) => sum + rt.routes.memoBytes, 0),
      tokens: cache.validity.tokens.bytes,
      rewrittenBodies: rewrittenBodies.bytes,
      decodedBodies: decodedForms.bytes,
      l2Memo: cache.shared?.l2.memoBytes ?? 0,
      sharedHeaders: headerTable.bytes,
      logMemo: memos.accessLog.bytes,
      credentialMemo: memos.credentials.bytes,
      oidcMemo: oidc?.memoBytes ?? 0,
    }),
  });
  const memos: HandlerMemos = { accessLog: createLogMemo(), credentials: createPoolCredentials() };
  const oidc = config.consumers.enabled && config.consumers.oidc.length > 0 ? createOidcVerifier(config.consumers.oidc) : undefined;
  const probeTarget = upstreams.find((rt) => rt.cfg.token_pool);

  return {
    redis,
    cache,
    coalescer,
    tags,
    refreshAhead,
    partitioner,
    pool,
    upstreams,
    entrances,
    consumers: config.consumers.enabled ? createConsumers(consumerKeysOf(config.consumers.keys, consumerKeysFromFile(config))) : undefined,
    oidc,
    consumerBudget,
    webhooks: createWebhookReceiver(config.webhooks, { validity: cache.validity, tags, upstreams, redis, logger, metrics }),
    memos,
    requestId: createRequestIds(),
    tracing,
    async start() {
      if (redis !== undefined && config.cache.partition_secret === null) await agreeOnPartitionSecret(redis, partitioner, logger);
      await pool?.start();
      await cache.validity.loadMarks();
      if (pool !== undefined && probeTarget !== undefined && config.pool.probe_at_start) await pool.probe(probeTarget.client);
    },
    reloadTokens(trigger) {
      if (runtime?.reload !== undefined) return runtime.reload(trigger);
      if (runtime !== undefined) return Promise.resolve({ result: 'skipped', why: 'a cluster worker: the primary reloads the pool' });
      return Promise.resolve(reloadWithoutPool(config.pool.tokens_file, trigger, logger, metrics));
    },
    async close() {
      refreshAhead.close();
      consumerBudget?.close();
      pool?.close();
      tags.close();
      cache.close();
      await redis?.close();
      for (const entrance of entrances) {
        entrance.passThrough?.close();
        entrance.graphql?.close();
      }
      await Promise.all(upstreams.map((rt) => rt.client.close()));
      await tracing.shutdown(); // the last spans, bounded: a collector that is down never holds shutdown
    },
  };
}

/** Each upstream's pass-through and GraphQL entrance (the handler picks them). */
function buildEntrances(config: Config, upstreams: UpstreamRuntime[], cache: Cache, links: LinkSettings, tracing: Tracing): Entrances[] {
  // RFC 9111 section 4.4: a non-error response to an unsafe method invalidates the target URI.
  const invalidate = (upstream: UpstreamConfig, pathname: string, status: number): void => {
    if (status >= 200 && status < 400) cache.validity.invalidatePath(upstream.name, pathname);
  };
  return upstreams.map((rt): Entrances => {
    const passThrough = rt.cfg.pass_through ? createPassThrough(rt.cfg, invalidate, links, tracing) : undefined;
    const graphql = rt.cfg.graphql
      ? createGraphqlRuntime(rt.cfg, rt.client.basePath, createPassThrough(rt.cfg, undefined, links, tracing))
      : undefined;
    return { passThrough, graphql };
  });
}

/** The longest freshness an upstream's configuration gives, seconds (the upstream's own max-age aside). */
function longestFreshness(upstream: Config['upstreams'][number]): number {
  const cache = upstream.cache;
  return Math.max(cache.webhook_fresh_seconds, cache.ttl_seconds ?? 0, cache.max_age_cap_seconds ?? 0);
}

/**
 * Replicas must turn a credential into the same partition to share its entries. Without a
 * configured cache.partition_secret, the first replica stores a random one in Redis (SET NX) and
 * every replica uses it. When Redis is unreachable at start-up the process keeps its own random
 * secret: its client-credential entries are then simply not shared.
 */
async function agreeOnPartitionSecret(redis: RedisConnection, partitioner: Partitioner, logger: Logger): Promise<void> {
  const key = `${redis.prefix}partition-secret`;
  const deadline = Date.now() + 1_000; // a start-up with Redis down waits at most this long
  while (!redis.up() && Date.now() < deadline) await new Promise<void>((resolve) => setTimeout(resolve, 20));
  const candidate = randomBytes(32).toString('base64url');
  const secret = await redis.run('secret', async (client) => {
    await client.set(key, candidate, 'NX');
    return client.get(key);
  });
  if (typeof secret === 'string' && secret.length >= 16) partitioner.rekey(secret);
  else
    logger.warn(
      'Redis unreachable at start-up: credential partitions use a secret of this process only (set cache.partition_secret to share them)',
    );
}
