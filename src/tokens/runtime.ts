/**
 * Builds the token pool from the config, connects its events to metrics and logs (by token name
 * only), and learns each token's numbers from GET /rate_limit (free on GitHub): every resource at
 * start-up; to confirm a 401 a request met (confirm.ts: at most once a minute per token); and
 * every pool.revive_interval_ms for the dead tokens, which come back when they answer again.
 * Confirmations and revivals use a client of their own to the first pooled upstream.
 */
import type { Config } from '../config/schema.js';
import type { Logger } from '../log/logger.js';
import type { Metrics } from '../metrics/registry.js';
import { headerReader } from '../headers/value.js';
import type { RedisConnection } from '../redis/connection.js';
import { createUpstreamClient, type UpstreamClient } from '../upstream/client.js';
import { createConfirmer } from './confirm.js';
import { createTokenPool } from './local-pool.js';
import { tokenName } from './name.js';
import { createPoolHeaders } from './pool-headers.js';
import type { PoolContext } from './pooled-fetch.js';
import { rateLimitsFromBody, readRateLimit } from './rate-limit.js';
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
      log.error(
        { tokenName: name },
        'pool token rejected by the upstream (401, confirmed by GET /rate_limit): out of the pool until it answers again',
      );
    },
    revived(name) {
      metrics.tokenEvents.inc({ token: name, event: 'revived' });
      log.warn({ tokenName: name }, 'pool token answers again (GET /rate_limit): revived, back in the pool');
    },
    exhausted(name, reset, resource = 'core') {
      metrics.tokenEvents.inc({ token: name, event: 'exhausted' });
      log.warn({ tokenName: name, resource, reset: new Date(reset * 1000).toISOString() }, 'pool token hit its primary rate limit');
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

/**
 * Asks the upstream for one token's numbers (GET /rate_limit at `path`, every resource) and tells
 * the pool; returns the status (undefined when the probe failed). Never throws.
 */
async function probeToken(pool: TokenPool, client: UpstreamClient, path: string, name: string, log: Logger): Promise<number | undefined> {
  const authorization = pool.authorizationOf(name);
  if (authorization === undefined) return undefined;
  try {
    const res = await client.request({ method: 'GET', path, headers: { authorization, accept: 'application/vnd.github+json' } });
    let body = '';
    for await (const chunk of res.body) {
      body += (chunk as Buffer).toString('utf8');
      if (body.length > PROBE_BODY_LIMIT) break;
    }
    const header = headerReader(res.headers);
    const fromBody = res.statusCode === 200 ? rateLimitsFromBody(body) : [];
    const fromHeaders = readRateLimit(header);
    pool.learn(name, res.statusCode, fromBody.length > 0 ? fromBody : fromHeaders);
    if (res.statusCode !== 200 && res.statusCode !== 401)
      log.warn({ tokenName: name, status: res.statusCode }, 'rate_limit probe answered unexpectedly');
    return res.statusCode;
  } catch (err) {
    pool.learn(name, 0, undefined, `rate_limit probe failed: ${(err as { code?: string }).code ?? 'error'}`);
    log.warn({ tokenName: name, err: (err as { code?: string }).code ?? (err as Error).message }, 'rate_limit probe failed');
    return undefined;
  }
}

/**
 * Confirmation of 401s and revival of dead tokens for `pool`, on a client of its own to the
 * first pooled upstream (created on first use). Returns the pool with `confirm`, and a close.
 */
function withConfirmation(config: Config, base: TokenPool, log: Logger): { pool: TokenPool; close(): void } {
  const target = config.upstreams.find((upstream) => upstream.token_pool);
  if (target === undefined) return { pool: base, close: () => undefined };
  let client: UpstreamClient | undefined;
  const confirmer = createConfirmer({
    names: base.names,
    now: Date.now,
    probe: (name) => {
      client ??= createUpstreamClient(target);
      return probeToken(base, client, `${client.basePrefix}/rate_limit`, name, log);
    },
  });
  const timer = setInterval(() => {
    for (const token of base.snapshot()) if (token.state === 'dead') void confirmer.probeNow(token.name);
  }, config.pool.revive_interval_ms);
  timer.unref();
  return {
    pool: { ...base, confirm: (name, kind) => confirmer.confirm(name, kind) },
    close() {
      clearInterval(timer);
      void client?.close().catch(() => undefined);
    },
  };
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
  const confirmation = withConfirmation(config, shared ?? local, log);
  const pool: TokenPool = confirmation.pool;
  metrics.watchPool({ tokens: () => pool.snapshot(), queueLength: () => pool.queueLength() });
  log.info({ tokenNames: pool.names, equivalent: pool.equivalent }, 'token pool ready');

  return {
    pool,
    headers: createPoolHeaders(pool),
    probe: async (client) => {
      const path = `${client.basePrefix}/rate_limit`;
      await Promise.all(pool.names.map((name) => probeToken(pool, client, path, name, log)));
    },
    close: () => {
      confirmation.close();
      pool.close();
    },
    budget: () => ({ shared: shared?.shared() ?? false, replicas: shared?.replicas() ?? 1 }),
  };
}
