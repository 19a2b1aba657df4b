/**
 * Builds the token pool from the config, connects its events to metrics and logs (by token name
 * only), and learns each token's numbers from GET /rate_limit at start-up (free on GitHub).
 */
import type { Config } from '../config/schema.js';
import type { Logger } from '../log/logger.js';
import type { Metrics } from '../metrics/registry.js';
import { headerReader } from '../headers/value.js';
import type { RedisConnection } from '../redis/connection.js';
import type { UpstreamClient } from '../upstream/client.js';
import { createTokenPool } from './local-pool.js';
import { tokenName } from './name.js';
import { createPoolHeaders } from './pool-headers.js';
import type { PoolContext } from './pooled-fetch.js';
import { rateLimitFromBody, readRateLimit } from './rate-limit.js';
import { createSharedTokenPool, type SharedTokenPool } from './shared-pool.js';
import type { PoolEvents, TokenPool } from './types.js';

export interface PoolRuntime extends PoolContext {
  /** Where the budget lives, for /admin/tokens. */
  budget(): { shared: boolean; replicas: number };
  /** Asks the upstream for every token's numbers (GET /rate_limit); never throws. */
  probe(client: UpstreamClient): Promise<void>;
  close(): void;
}

const PROBE_BODY_LIMIT = 64 * 1024;

/** The pool's events as metrics and logs (tokens by name only). */
function poolEvents(metrics: Metrics, log: Logger): PoolEvents {
  return {
    dead(name) {
      metrics.tokenEvents.inc({ token: name, event: 'dead' });
      log.error({ tokenName: name }, 'pool token rejected by the upstream (401): dropped from the pool');
    },
    exhausted(name, reset) {
      metrics.tokenEvents.inc({ token: name, event: 'exhausted' });
      log.warn({ tokenName: name, reset: new Date(reset * 1000).toISOString() }, 'pool token hit its primary rate limit');
    },
    secondary(name, pauseMs) {
      metrics.tokenEvents.inc({ token: name, event: 'secondary' });
      log.warn({ tokenName: name, pauseSeconds: Math.ceil(pauseMs / 1000) }, 'pool token hit a secondary rate limit: paused');
    },
    rejected(reason) {
      metrics.poolRejections.inc({ reason });
      if (reason === 'exhausted') metrics.poolExhausted.inc();
    },
    queued(seconds) {
      metrics.queueWait.observe(seconds);
    },
  };
}

/** Asks the upstream for one token's numbers (GET /rate_limit at `path`) and tells the pool; never throws. */
async function probeToken(pool: TokenPool, client: UpstreamClient, path: string, name: string, log: Logger): Promise<void> {
  const authorization = pool.authorizationOf(name);
  if (authorization === undefined) return;
  try {
    const res = await client.request({ method: 'GET', path, headers: { authorization, accept: 'application/vnd.github+json' } });
    let body = '';
    for await (const chunk of res.body) {
      body += (chunk as Buffer).toString('utf8');
      if (body.length > PROBE_BODY_LIMIT) break;
    }
    const header = headerReader(res.headers);
    const observation = res.statusCode === 200 ? (rateLimitFromBody(body) ?? readRateLimit(header)) : readRateLimit(header);
    pool.learn(name, res.statusCode, observation);
    if (res.statusCode !== 200 && res.statusCode !== 401)
      log.warn({ tokenName: name, status: res.statusCode }, 'rate_limit probe answered unexpectedly');
  } catch (err) {
    pool.learn(name, 0, undefined, `rate_limit probe failed: ${(err as { code?: string }).code ?? 'error'}`);
    log.warn({ tokenName: name, err: (err as { code?: string }).code ?? (err as Error).message }, 'rate_limit probe failed');
  }
}

export function createPoolRuntime(
  config: Config,
  logger: Logger,
  metrics: Metrics,
  redis?: RedisConnection,
  override?: TokenPool,
): PoolRuntime | undefined {
  if (config.pool.tokens.length === 0) return undefined;
  if (override !== undefined) {
    // A cluster worker: the pool lives in the primary process, which also probes and reports it.
    return {
      pool: override,
      headers: createPoolHeaders(override),
      probe: async () => undefined,
      close: () => override.close(),
      budget: () => ({ shared: false, replicas: 1 }),
    };
  }
  const log = logger.child({ component: 'token-pool' });
  const local = createTokenPool({
    tokens: config.pool.tokens.map((token) => ({ name: tokenName(token.value, token.name), value: token.value })),
    equivalent: config.pool.equivalent,
    perTokenConcurrency: config.pool.per_token_concurrency,
    maxConcurrency: config.pool.max_concurrency,
    queueTimeoutMs: config.pool.queue_timeout_ms,
    maxQueue: config.pool.max_queue,
    events: poolEvents(metrics, log),
  });
  const sharedSettings = {
    perTokenConcurrency: config.pool.per_token_concurrency,
    maxConcurrency: config.pool.max_concurrency,
    queueTimeoutMs: config.pool.queue_timeout_ms,
  };
  const shared: SharedTokenPool | undefined =
    redis !== undefined && config.redis.shared_tokens ? createSharedTokenPool(local, redis, sharedSettings, logger) : undefined;
  const pool: TokenPool = shared ?? local;
  metrics.watchPool({ tokens: () => pool.snapshot(), queueLength: () => pool.queueLength() });
  log.info({ tokenNames: pool.names, equivalent: pool.equivalent }, 'token pool ready');

  return {
    pool,
    headers: createPoolHeaders(pool),
    probe: async (client) => {
      const path = `${client.basePrefix}/rate_limit`;
      await Promise.all(pool.names.map((name) => probeToken(pool, client, path, name, log)));
    },
    close: () => pool.close(),
    budget: () => ({ shared: shared?.shared() ?? false, replicas: shared?.replicas() ?? 1 }),
  };
}
