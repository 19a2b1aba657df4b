/**
 * Wires one proxy instance from a validated config: logger, metrics, handler, listeners and
 * graceful shutdown. `startApp` is what `etagere serve` and the tests call.
 */
import type { Server } from 'node:http';
import type { TokenPool, TokenReport } from '../pool/rules/types.js';
import type { Config } from '../platform/config/schema.js';
import { createLogger, type Logger } from '../platform/log/logger.js';
import { createMetrics, type Metrics } from '../platform/metrics/registry.js';
import { Handler } from './handler.js';
import { buildServices, type Services } from './services.js';
import { createAdminServer } from '../paths/admin/admin.js';
import { consumerLabelMode } from '../platform/metrics/labels.js';
import { createCacheAdmin, type Answer, type CacheCall } from '../paths/admin/admin-cache.js';
import { hardenListener, RequestListener } from './connections.js';
import { closed, listen, urlOf } from './listen.js';
import type { AppTiming } from '../pool/members/app-members.js';
import type { ReloadOutcome, ReloadTrigger } from '../pool/members/reload.js';
import { watchFile, type FileWatch } from '../pool/members/watch-file.js';
import { createConsumerKeysReloader, type ConsumerKeysReloader, type KeysReloadOutcome } from '../pool/consumers/keys-reload.js';
import { consumerKeysFromFile } from '../platform/config/load.js';
import { createListener, type TlsReload } from './tls.js';
import { createTracing } from '../platform/trace/setup.js';
import { HeadBlocks, writeBlockHead, type WriteHead } from '../http/header-block.js';

export interface App {
  /** Base URL of the proxy listener, e.g. http://127.0.0.1:8080 (https:// with listen.tls) */
  readonly url: string;
  readonly adminUrl: string;
  readonly server: Server;
  readonly admin: Server;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Number of requests currently being answered. */
  inFlight(): number;
  /** The pool tokens' state (names only), empty without a pool. */
  tokens(): TokenReport[];
  /** Redis connected (null when Redis is not configured). */
  redisUp(): boolean | null;
  /** Whether the pool had members since start-up (true without a pool; an App-only pool once it minted). */
  poolReady(): boolean;
  /**
   * Reloads pool.tokens_file into the token pool (what SIGHUP does; src/pool/members/reload.ts): the
   * outcome, also logged by token names. On a signal, the listener's certificate too (`reloadTls`).
   * Never throws.
   */
  reloadTokens(trigger?: ReloadTrigger): Promise<ReloadOutcome>;
  /** Reads listen.tls's pair again into the listener (false: refused, the old one stays; true without TLS). */
  reloadTls(): boolean;
  /** Reloads consumers.keys_file (src/pool/consumers/keys-reload.ts); undefined without one. Never throws. */
  reloadConsumerKeys(trigger: ReloadTrigger): KeysReloadOutcome | undefined;
  /** Purge, inspect or stats of this process's cache (what /admin/purge and /admin/cache answer; a cluster primary asks its workers). */
  cacheAdmin(call: CacheCall): Answer | Promise<Answer>;
  /**
   * Graceful stop: refuse new connections, let in-flight requests finish (up to the drain
   * timeout), then close everything. Logs a line when it starts (with the signal, if one asked)
   * and one when it is done, saying whether every request finished. Idempotent.
   */
  close(signal?: string): Promise<void>;
}

export interface AppOptions {
  logger?: Logger;
  metrics?: Metrics;
  /** False in a cluster worker: the primary process serves the admin port. */
  adminListener?: boolean;
  /** A token pool to use instead of one built from the config (a worker's IPC pool). */
  pool?: TokenPool;
  /** Reload pool.tokens_file when it changes (default true; false in a cluster worker: the primary watches). */
  watchTokensFile?: boolean;
  /** The GitHub App sources' clocks: shorter in tests (no config key: src/pool/members/app-members.ts). */
  appTiming?: AppTiming;
  /** How heads are written as blocks (tests give one that fails the self-test). */
  headBlocks?: WriteHead;
}

/** How long an idle keep-alive connection is kept (the listener's, and the self-test's). */
const KEEP_ALIVE_MS = 65_000;

/**
 * A process's logger, metrics and services. Each process (each cluster worker) traces and exports
 * its own spans; `services.close()` flushes them, within a bound.
 */
async function processServices(config: Config, opts: AppOptions): Promise<ProcessServices> {
  const logger = opts.logger ?? createLogger({ level: config.log.level });
  const metrics = opts.metrics ?? createMetrics();
  const tracing = await createTracing(config.tracing, logger);
  // Answer heads as one block per stored form, once a loopback answer shows Node takes them as its own writeHead's.
  const heads = await HeadBlocks.start(opts.headBlocks ?? writeBlockHead, KEEP_ALIVE_MS);
  if (heads === undefined) logger.warn('answer heads are written by writeHead: the self-test of head blocks failed on this Node');
  return { logger, metrics, heads, services: buildServices(config, { logger, metrics, appTiming: opts.appTiming, tracing }, opts.pool) };
}

interface ProcessServices {
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly services: Services;
  readonly heads: HeadBlocks | undefined;
}

export async function startApp(config: Config, opts: AppOptions = {}): Promise<App> {
  const { logger, metrics, services, heads } = await processServices(config, opts);
  const handler = new Handler(config, services, { logger, metrics, heads });
  const cacheAdmin = createCacheAdmin({
    cache: services.cache,
    upstreams: config.upstreams.map((upstream) => upstream.name),
    metrics,
    shared: services.redis !== undefined,
    tags: services.tags,
  });
  const listener = new RequestListener(handler, services.requestId);

  // requireHostHeader: false: the handler answers a missing (or repeated) Host itself, in JSON.
  // With listen.tls, HTTPS with the same handler (src/main/tls.ts reloads its certificate).
  const { server, tls } = createListener(
    config.listen.tls,
    { keepAliveTimeout: KEEP_ALIVE_MS, requestTimeout: 60_000, headersTimeout: 20_000, requireHostHeader: false },
    listener.serve,
    logger,
  );
  // Parse errors, CONNECT, Expect, half-closed clients and pipelining: src/main/connections.ts.
  hardenListener(server);

  // Redis is optional unless the config says it is required: a Redis outage never makes the
  // proxy unready by default (it serves from L1 and the upstream). A pool of GitHub Apps only is
  // ready once it had a member (a wrong key keeps a new rollout from taking traffic).
  const redisOk = (): boolean => !config.redis.required || services.redis === undefined || services.redis.up();
  const admin = createAdminServer(metrics, {
    ready: () => !listener.draining && server.listening && redisOk() && (services.pool?.ready() ?? true),
    tokens: () => services.pool?.pool.snapshot(),
    budget: () => services.pool?.budget(),
    consumers: () => services.consumerBudget?.report(),
    redis: () => ({ configured: services.redis !== undefined, up: services.redis?.up() ?? false }),
    allowedHosts: config.admin.allowed_hosts,
    token: config.admin.token,
    equivalentConfigured: config.pool.equivalent,
    consumerLabel: consumerLabelMode(config.metrics.consumer_label, config.consumers.enabled),
    cache: (call) => Promise.resolve(cacheAdmin(call)),
  });
  // The pool learns its tokens' numbers before traffic arrives (bounded by the upstream timeouts).
  await services.start();
  const addr = await listen(server, config.listen.port, config.listen.host);
  const adminAddr = opts.adminListener === false ? undefined : await listen(admin, config.admin.port, config.admin.host);
  const watch = tokensFileWatch(config, services, opts, logger);
  const keys = consumerKeysReload(config, services, { logger, metrics });

  let closing: Promise<void> | undefined;
  const close = (signal?: string): Promise<void> => {
    closing ??= (async () => {
      listener.draining = true;
      watch?.close();
      keys?.watch.close();
      tls?.close();
      const started = Date.now();
      const atStart = listener.inFlight;
      logger.info({ signal, inFlight: atStart, drainTimeoutMs: config.shutdown.drain_timeout_ms }, 'etagere shutting down: draining');
      const done = closed(server); // stops accepting; resolves once every connection has ended
      server.closeIdleConnections();
      await listener.idle(config.shutdown.drain_timeout_ms);
      if (listener.inFlight > 0) logger.warn({ inFlight: listener.inFlight }, 'drain timeout reached; closing remaining connections');
      const cut = listener.inFlight;
      server.closeAllConnections();
      await done;
      handler.flush(); // the access lines still waiting, ahead of the last lines
      await services.close();
      admin.closeAllConnections();
      await closed(admin);
      logger.info(
        { drained: cut === 0, finished: atStart - cut, cut, ms: Date.now() - started },
        cut === 0 ? 'etagere stopped: every request finished' : 'etagere stopped: drain timeout cut requests',
      );
      logger.flush?.();
    })();
    return closing;
  };

  return {
    url: urlOf(addr, tls === undefined ? 'http' : 'https'),
    adminUrl: adminAddr === undefined ? '' : urlOf(adminAddr),
    server,
    admin,
    logger,
    metrics,
    inFlight: () => listener.inFlight,
    tokens: () => services.pool?.pool.snapshot() ?? [],
    redisUp: () => (services.redis === undefined ? null : services.redis.up()),
    poolReady: () => services.pool?.ready() ?? true,
    reloadTokens: reloadOnSignal(tls, keys?.reloader, (trigger) => services.reloadTokens(trigger)),
    reloadTls: () => tls?.reload('signal') ?? true,
    reloadConsumerKeys: (trigger) => keys?.reloader.reload(trigger),
    cacheAdmin,
    close,
  };
}

/**
 * What SIGHUP reloads: the tokens file, and the listener's certificate and the consumer keys file
 * (those two on a signal only: each has its own file watch).
 */
function reloadOnSignal(
  tls: TlsReload | undefined,
  keys: ConsumerKeysReloader | undefined,
  reloadTokens: (trigger: ReloadTrigger) => Promise<ReloadOutcome>,
) {
  return (trigger: ReloadTrigger = 'signal'): Promise<ReloadOutcome> => {
    if (trigger === 'signal') {
      tls?.reload('signal');
      keys?.reload('signal');
    }
    return reloadTokens(trigger);
  };
}

/** The watch of pool.tokens_file (not in a cluster worker: the primary watches it). */
function tokensFileWatch(config: Config, services: Services, opts: AppOptions, logger: Logger): FileWatch | undefined {
  const file = config.pool.tokens_file;
  if (file === null || opts.watchTokensFile === false) return undefined;
  return watchFile(file, () => void services.reloadTokens('file'), logger.child({ component: 'token-pool' }));
}

/**
 * consumers.keys_file's reloader and its file watch, when consumer keys come from a file. Every
 * process (each cluster worker too) checks consumer keys itself, so each watches the file.
 */
function consumerKeysReload(
  config: Config,
  services: Services,
  deps: { logger: Logger; metrics: Metrics },
): { reloader: ConsumerKeysReloader; watch: FileWatch } | undefined {
  const file = config.consumers.keys_file;
  if (file === null || services.consumers === undefined) return undefined;
  const log = deps.logger.child({ component: 'consumers' });
  const reloader = createConsumerKeysReloader({
    file,
    configured: config.consumers.keys,
    initial: consumerKeysFromFile(config),
    consumers: services.consumers,
    log,
    metrics: deps.metrics,
  });
  return { reloader, watch: watchFile(file, () => void reloader.reload('file'), log, undefined, 'consumer keys file') };
}
