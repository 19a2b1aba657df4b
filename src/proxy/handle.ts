/**
 * The orchestrating request handler. Read top to bottom, it is the request path:
 *   target check -> route -> method gate (pass-through or 405) -> cached path (GET/HEAD)
 *   or streaming forward (policy none) -> log and count when the response closes.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config, UpstreamConfig } from '../config/schema.js';
import { createAccessLog } from '../log/access.js';
import type { Logger } from '../log/logger.js';
import type { Metrics } from '../metrics/registry.js';
import { createConsumers } from '../tokens/consumers.js';
import type { TokenPool } from '../tokens/pool.js';
import { createRedisStore } from '../cache/redis-store.js';
import { createRedisConnection, type RedisConnection } from '../redis/connection.js';
import { createFlightLock } from '../redis/flight-lock.js';
import { createInvalidationBus } from '../redis/invalidation-bus.js';
import { createHttpCache, type HttpCache, type SharedCache } from './cached.js';
import { dropConsumerBasic, resolveCredential, type CredentialRules } from './credential.js';
import { errors } from './errors.js';
import type { Exchange } from './exchange.js';
import { forward } from './forward.js';
import { requestId } from './request-id.js';
import { createRouter, upstreamPath } from './route.js';
import { checkFraming, checkHost, parseTarget } from './target.js';
import { isRateLimitPath, sendPoolRateLimit } from './pool-headers.js';
import { createPoolRuntime } from './pool-runtime.js';
import { createUpstreamRuntime } from './upstreams.js';

export interface Handler {
  (req: IncomingMessage, res: ServerResponse): void;
  readonly cache: HttpCache;
  /** The token pool, when tokens are configured. */
  readonly pool: TokenPool | undefined;
  /** Where the pool's budget lives: shared through Redis, or this process only. */
  budget(): { shared: boolean; replicas: number } | undefined;
  /** The Redis connection, when Redis is configured. */
  readonly redis: RedisConnection | undefined;
  /** Learns the pool tokens' numbers from the upstream (GET /rate_limit); never throws. */
  start(): Promise<void>;
  close(): Promise<void>;
}

export function createHandler(config: Config, logger: Logger, metrics: Metrics, poolOverride?: TokenPool): Handler {
  const router = createRouter(config.upstreams);
  const access = createAccessLog(logger);
  const redis = createRedisConnection(config.redis, logger, metrics);
  const poolRt = createPoolRuntime(config, logger, metrics, redis, poolOverride);
  let shared: SharedCache | undefined;
  if (redis !== undefined) {
    const l2 = createRedisStore(redis, logger, metrics);
    shared = { l2, lock: createFlightLock(redis, l2, config.redis.lock_ms), waitMs: config.redis.wait_ms, bus: undefined };
  }
  const cache = createHttpCache(config, logger, metrics, poolRt, shared);
  if (redis !== undefined && shared !== undefined) shared.bus = createInvalidationBus(redis, cache.remote, logger);
  const consumers = config.consumers.enabled ? createConsumers(config.consumers.keys) : undefined;
  const rulesFor = (cfg: UpstreamConfig): CredentialRules => ({
    pooled: cfg.token_pool && poolRt !== undefined,
    consumers,
    unknown: config.consumers.unknown,
  });
  const onUnsafeResponse = (cfg: UpstreamConfig, pathname: string, status: number): void => {
    // RFC 9111 section 4.4: a non-error response to an unsafe method invalidates the target URI.
    if (status >= 200 && status < 400) cache.invalidatePath(cfg.name, pathname);
  };
  const runtimes = config.upstreams.map((u) => createUpstreamRuntime(u, onUnsafeResponse));
  const rules = runtimes.map((rt) => rulesFor(rt.cfg));

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const started = performance.now();
    const socket = req.socket;
    const bytesBefore = socket.bytesWritten;
    const id = requestId(req.headers['x-request-id']);
    let x: Exchange | undefined;
    let routeOf = '-';

    res.once('close', () => {
      const seconds = (performance.now() - started) / 1e3;
      const upstreamName = x?.upstream.cfg.name ?? '-';
      metrics.observeRequest(upstreamName, x?.route ?? routeOf, req.method ?? '-', res.statusCode, x?.outcome, seconds, x !== undefined && x.cred.kind !== 'anonymous');
      access({
        reqId: id,
        method: req.method ?? '-',
        path: req.url ?? '',
        upstream: upstreamName,
        route: x?.route ?? routeOf,
        status: res.statusCode,
        cache: x?.outcome,
        upstreamStatus: x?.upstreamStatus,
        token: x?.token,
        durationMs: Math.round(seconds * 1e6) / 1e3,
        bytes: socket.bytesWritten - bytesBefore,
        aborted: !res.writableFinished,
      });
    });

    const target =
      checkHost(req.rawHeaders, req.httpVersionMajor === 1 && req.httpVersionMinor === 1) ??
      checkFraming(req.headers['transfer-encoding']) ??
      parseTarget(req.url);
    if (target.ok === false) {
      if (target.close === true) res.shouldKeepAlive = false;
      drain(req);
      res.setHeader('x-request-id', id);
      errors.badRequest(res, target.reason);
      return;
    }
    const route = router.match(target.pathname);
    if (route === undefined) {
      drain(req);
      res.setHeader('x-request-id', id);
      errors.noRoute(res);
      return;
    }
    const upstream = runtimes[route.index]!;
    routeOf = upstream.routes.match(target.pathname);
    const path = upstreamPath(upstream.cfg, upstream.client.basePath, target.pathname, target.search);
    const method = req.method;

    if (method !== 'GET' && method !== 'HEAD') {
      res.setHeader('x-request-id', id);
      delete req.headers['x-etagere-key']; // never forwarded; unsafe methods never use the pool
      if (consumers !== undefined) dropConsumerBasic(req.headers, consumers); // nor a key sent as Basic user
      if (upstream.passThrough === undefined) {
        drain(req);
        errors.methodNotAllowed(res, method ?? '?');
        return;
      }
      upstream.passThrough.forward(req, res, target.pathname, path, id);
      return;
    }
    drain(req);

    const cred = resolveCredential(req.headers, rules[route.index]!);
    if (cred === undefined) {
      res.setHeader('x-request-id', id);
      metrics.consumerRejections.inc();
      errors.consumerKeyRequired(res);
      return;
    }
    if (cred.kind === 'pool' && cred.consumer !== undefined) metrics.consumerRequests.inc({ consumer: cred.consumer });
    x = {
      req,
      res,
      id,
      upstream,
      pathname: target.pathname,
      search: target.search,
      path,
      method,
      route: routeOf,
      cred,
      outcome: undefined,
      upstreamStatus: undefined,
      token: undefined,
    };
    if (cred.kind === 'pool' && poolRt !== undefined && isRateLimitPath(path, upstream.client.basePath)) {
      sendPoolRateLimit(res, poolRt.headers, poolRt.pool.rateLimit(), id, method === 'HEAD');
      return;
    }
    if (upstream.cfg.cache.policy === 'none') {
      forward(x, cache.links, logger, metrics, poolRt);
      return;
    }
    cache.serve(x);
  };

  const probeTarget = runtimes.find((rt) => rt.cfg.token_pool);
  return Object.assign(handler, {
    cache,
    pool: poolRt?.pool,
    budget: () => poolRt?.budget(),
    redis,
    start: async (): Promise<void> => {
      if (redis !== undefined && config.cache.partition_secret === null) await agreeOnPartitionSecret(redis, cache, logger);
      if (poolRt !== undefined && probeTarget !== undefined && config.pool.probe_at_start) {
        await poolRt.probe(probeTarget.client, probeTarget.client.basePath);
      }
    },
    close: async (): Promise<void> => {
      poolRt?.close();
      shared?.bus?.close();
      await redis?.close();
      for (const rt of runtimes) rt.passThrough?.close();
      await Promise.all(runtimes.map((rt) => rt.client.close()));
    },
  });
}

/** GET and HEAD bodies are never forwarded; read and drop them so keep-alive keeps working. */
function drain(req: IncomingMessage): void {
  if (!req.complete) req.resume();
}

/**
 * Replicas must turn a credential into the same partition to share its entries. Without a
 * configured cache.partition_secret, the first replica stores a random one in Redis (SET NX) and
 * every replica uses it. When Redis is unreachable at start-up the process keeps its own random
 * secret: its client-credential entries are then simply not shared.
 */
async function agreeOnPartitionSecret(redis: RedisConnection, cache: HttpCache, logger: Logger): Promise<void> {
  const key = `${redis.prefix}partition-secret`;
  const deadline = Date.now() + 1_000; // a start-up with Redis down waits at most this long
  while (!redis.up() && Date.now() < deadline) await new Promise<void>((r) => setTimeout(r, 20));
  const candidate = randomBytes(32).toString('base64url');
  const secret = await redis.run('secret', async (c) => {
    await c.set(key, candidate, 'NX');
    return c.get(key);
  });
  if (typeof secret === 'string' && secret.length >= 16) cache.partitioner.rekey(secret);
  else logger.warn('Redis unreachable at start-up: credential partitions use a secret of this process only (set cache.partition_secret to share them)');
}
