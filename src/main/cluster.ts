/**
 * Multi-core serving (`workers: N` or `auto`) with node:cluster. Each worker is a full proxy
 * with its own L1 and shares the listening socket (the kernel spreads connections: SCHED_NONE).
 * The primary process serves the admin port for the whole machine: health, readiness (every
 * worker listening), /metrics aggregated over the workers, the status page and /admin/tokens.
 * With Redis, workers share L2, the token budget and single flight through it, like replicas;
 * without Redis, the primary owns the token budget and workers lease tokens over IPC
 * (ipc-pool.ts), so one machine never overspends. A worker that dies is replaced.
 *
 * The primary reloads pool.tokens_file (SIGHUP, or the file changed; workers ignore SIGHUP and
 * never watch): when it owns the budget it reloads its pool and sends the workers the new members;
 * with Redis each worker owns a pool of its own, so the primary tells every worker to reload.
 *
 * GitHub Apps (pool.apps) mint where the pool lives: without Redis in the primary alone (its
 * installation tokens reach the workers with the members, before a lease needs them); with Redis
 * in each worker, like each replica (docs/token-pool.md says why). Readiness waits for an
 * App-only pool's first member, in the primary or in every worker.
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import { AggregatorRegistry, type Registry } from 'prom-client';
import { startApp, type App } from './app.js';
import type { Config } from '../platform/config/schema.js';
import { createLogger, type Logger } from '../platform/log/logger.js';
import type { RecentSummary } from '../platform/metrics/request-metrics.js';
import { consumerLabelMode } from '../platform/metrics/labels.js';
import { quotaReport, type QuotaRow, type QuotaWindow } from '../platform/metrics/quota-windows.js';
import { createMetrics, type Metrics } from '../platform/metrics/registry.js';
import { createAdminServer } from '../paths/admin/admin.js';
import { combineAnswers, type Answer, type CacheCall } from '../paths/admin/admin-cache.js';
import { closed, listen, urlOf } from './listen.js';
import { buildPool } from './services.js';
import { tokenName } from '../platform/config/token-name.js';
import type { TokenReport } from '../pool/rules/types.js';
import { createUpstreamClient } from '../upstream/fetch.js';
import { createIpcTokenPool, ignoreSendError, servePool } from '../pool/backends/ipc-pool.js';
import { reloadWithoutPool, type ReloadTrigger } from '../pool/members/reload.js';
import { poolConfigured, type PoolRuntime } from '../pool/runtime.js';
import { watchFile } from '../pool/members/watch-file.js';

/** How many workers `workers` asks for on this machine. */
export function workerCount(workers: Config['workers']): number {
  return workers === 'auto' ? Math.max(1, availableParallelism()) : workers;
}

/** Whether the token budget goes through the primary (no Redis to share it). */
function ipcBudget(config: Config): boolean {
  const redis = config.redis.url !== null || config.redis.cluster !== null;
  return poolConfigured(config) && (!redis || !config.redis.shared_tokens);
}

type Control =
  | { t: 'etagere:metrics'; id: number }
  | { t: 'etagere:metrics-reply'; id: number; json: unknown[] }
  /**
   * Pushed by every worker each second: its recent activity, its Redis state and (with Redis) its
   * view of the pool and whether its pool is ready (had members: its GitHub Apps minted).
   */
  | { t: 'etagere:recent'; summary: RecentSummary; redisUp: boolean | null; tokens: TokenReport[]; poolReady: boolean }
  /** To every worker with a pool of its own (Redis): reload pool.tokens_file. */
  | { t: 'etagere:reload'; trigger: ReloadTrigger }
  /** SIGHUP, to every worker: reload consumers.keys_file (each worker checks keys itself). */
  | { t: 'etagere:reload-keys' }
  /** A purge, inspection or stats call on the admin port (src/paths/admin/admin-cache.ts), to every worker, and each one's answer. */
  | { t: 'etagere:cache'; id: number; call: CacheCall }
  | { t: 'etagere:cache-reply'; id: number; answer: Answer }
  /** /admin/quota's rows of one window (src/platform/metrics/quota-windows.ts), from every worker. */
  | { t: 'etagere:quota'; id: number; window: QuotaWindow }
  | { t: 'etagere:quota-reply'; id: number; rows: QuotaRow[] };

const isControl = (message: unknown): message is Control =>
  typeof message === 'object' &&
  message !== null &&
  String((message as { t?: unknown }).t).startsWith('etagere:') &&
  (message as { t: string }).t !== 'etagere:pool';

export interface ClusterPrimary {
  readonly adminUrl: string;
  /** Reloads pool.tokens_file (SIGHUP): the primary's own pool, or, with Redis, every worker's. */
  reload(trigger?: ReloadTrigger): Promise<void>;
  close(): Promise<void>;
}

/** Sums the workers' recent activity (the status page of the whole machine). */
function sumRecent(list: readonly RecentSummary[]): RecentSummary {
  const ups = new Map<string, RecentSummary['upstreams'][number]>();
  let requests = 0;
  let saved = 0;
  let hits = 0;
  for (const summary of list) {
    requests += summary.requests;
    saved += summary.saved;
    hits += summary.hits;
    for (const upstream of summary.upstreams) {
      const total = ups.get(upstream.name);
      if (total === undefined) ups.set(upstream.name, { ...upstream });
      else {
        total.requests += upstream.requests;
        total.errors += upstream.errors;
        if ((upstream.lastAt ?? 0) > (total.lastAt ?? 0)) {
          total.lastAt = upstream.lastAt;
          total.lastStatus = upstream.lastStatus;
        }
      }
    }
  }
  return {
    windowSeconds: list[0]?.windowSeconds ?? 300,
    requests,
    saved,
    hits,
    hitRatio: requests === 0 ? null : hits / requests,
    upstreams: [...ups.values()],
  };
}

/**
 * The primary's reload of pool.tokens_file, on SIGHUP (`reload`) and when the file changes (its
 * watch): its own pool (then the workers get the new members), or, with Redis, every worker's
 * (each owns a pool).
 */
function primaryReloads(
  config: Config,
  poolRt: PoolRuntime | undefined,
  pools: ReadonlyMap<number, ReturnType<typeof servePool>>,
  deps: { logger: Logger; metrics: Metrics },
): { reload(trigger?: ReloadTrigger): Promise<void>; close(): void } {
  /** On a signal, every worker reloads consumers.keys_file (a worker told to reload its pool does so with it). */
  const reloadKeys = (trigger: ReloadTrigger): void => {
    if (trigger !== 'signal' || config.consumers.keys_file === null) return;
    for (const worker of Object.values(cluster.workers ?? {}))
      if (worker?.isConnected() === true) worker.send({ t: 'etagere:reload-keys' } satisfies Control, ignoreSendError);
  };
  const reload = async (trigger: ReloadTrigger = 'signal'): Promise<void> => {
    if (poolRt?.reload !== undefined) {
      reloadKeys(trigger);
      await poolRt.reload(trigger);
      for (const poolServer of pools.values()) poolServer.members();
    } else if (!poolConfigured(config)) {
      reloadKeys(trigger);
      reloadWithoutPool(config.pool.tokens_file, trigger, deps.logger.child({ component: 'token-pool' }), deps.metrics);
    } else {
      const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());
      for (const worker of workers) worker.send({ t: 'etagere:reload', trigger } satisfies Control, ignoreSendError);
    }
  };
  const file = config.pool.tokens_file;
  const watch = file === null ? undefined : watchFile(file, () => void reload('file'), deps.logger.child({ component: 'token-pool' }));
  return { reload, close: () => watch?.close() };
}

/**
 * Without Redis to share it, the primary owns the token budget: a pool of its own (no Redis). It
 * alone mints the GitHub Apps' installation tokens (the workers get them with the members), and
 * learns every member's numbers before the workers start.
 */
async function primaryPool(config: Config, logger: Logger, metrics: Metrics): Promise<PoolRuntime | undefined> {
  const poolRt = buildPool(config, { logger, metrics });
  await poolRt?.start();
  const probeTarget = config.upstreams.find((u) => u.token_pool);
  if (poolRt !== undefined && probeTarget !== undefined && config.pool.probe_at_start) {
    const client = createUpstreamClient(probeTarget);
    await poolRt.probe(client);
    await client.close();
  }
  return poolRt;
}

export async function runPrimary(config: Config, logger: Logger = createLogger({ level: config.log.level })): Promise<ClusterPrimary> {
  const clusterSize = workerCount(config.workers);
  const metrics = createMetrics();
  const poolRt = ipcBudget(config) ? await primaryPool(config, logger, metrics) : undefined;

  cluster.schedulingPolicy = cluster.SCHED_NONE;
  let draining = false;
  const listening = new Set<number>();
  const recent = new Map<number, Extract<Control, { t: 'etagere:recent' }>>();
  const pools = new Map<number, ReturnType<typeof servePool>>();
  /** Waiting questions to workers (metrics, cache calls), by id. */
  const replies = new Map<number, (value: unknown) => void>();
  let seq = 0;

  const fork = (): Worker => {
    const worker = cluster.fork({ ETAGERE_WORKER: '1' });
    if (poolRt !== undefined) pools.set(worker.id, servePool(poolRt.pool, worker, poolRt.generation));
    worker.on('listening', () => listening.add(worker.id));
    worker.on('message', (message: unknown) => {
      if (!isControl(message)) return;
      if (message.t === 'etagere:recent') recent.set(worker.id, message);
      else if (message.t === 'etagere:metrics-reply' || message.t === 'etagere:cache-reply' || message.t === 'etagere:quota-reply') {
        replies.get(message.id)?.(
          message.t === 'etagere:metrics-reply' ? message.json : message.t === 'etagere:quota-reply' ? message.rows : message.answer,
        );
        replies.delete(message.id);
      }
    });
    worker.on('exit', (code, signal) => {
      listening.delete(worker.id);
      recent.delete(worker.id);
      pools.get(worker.id)?.close();
      pools.delete(worker.id);
      if (!draining) {
        logger.error({ worker: worker.id, code, signal }, 'worker exited; starting another');
        fork();
      }
    });
    return worker;
  };
  for (let i = 0; i < clusterSize; i++) fork();
  // Workers see the pool's numbers as soon as they change, and at least every second.
  const pushTimer = setInterval(() => {
    for (const poolServer of pools.values()) poolServer.push();
  }, 1_000);
  pushTimer.unref();

  const ask = <Reply>(question: (id: number) => Control): Promise<Reply[]> => askEveryWorker<Reply>(question, replies, () => ++seq);
  /** Every worker's registry as JSON, plus the primary's (the pool's gauges), summed by prom-client. */
  const metricsText = async (): Promise<string> => {
    const parts = await ask<unknown[]>((id) => ({ t: 'etagere:metrics', id }));
    const own = await metrics.registry.getMetricsAsJSON();
    const registry: Registry = AggregatorRegistry.aggregate([...parts, own] as object[]);
    return registry.metrics();
  };

  const admin = createAdminServer(metrics, {
    allowedHosts: config.admin.allowed_hosts,
    token: config.admin.token,
    equivalentConfigured: config.pool.equivalent,
    ready: () =>
      !draining && listening.size === clusterSize && (poolRt?.ready() ?? true) && [...recent.values()].every((worker) => worker.poolReady),
    // Without Redis the primary holds the pool; with it, every worker sees the shared numbers.
    tokens: () => poolRt?.pool.snapshot() ?? (!poolConfigured(config) ? undefined : ([...recent.values()][0]?.tokens ?? [])),
    budget: () => (!poolConfigured(config) ? undefined : { shared: poolRt === undefined, replicas: clusterSize }),
    redis: () => ({
      configured: config.redis.url !== null || config.redis.cluster !== null,
      up: recent.size > 0 && [...recent.values()].every((r) => r.redisUp === true),
    }),
    metricsText,
    recent: () => sumRecent([...recent.values()].map((r) => r.summary)),
    cache: async (call) => combineAnswers(call, await ask<Answer>((id) => ({ t: 'etagere:cache', id, call }))),
    consumerLabel: consumerLabelMode(config.metrics.consumer_label, config.consumers.enabled),
    quota: async (window, top) => quotaReport(window, await ask<QuotaRow[]>((id) => ({ t: 'etagere:quota', id, window })), top),
  });
  const addr = await listen(admin, config.admin.port, config.admin.host);
  const reloads = primaryReloads(config, poolRt, pools, { logger, metrics });
  logger.info(
    {
      workers: clusterSize,
      admin: urlOf(addr),
      budget: poolRt !== undefined ? 'primary (IPC)' : poolConfigured(config) ? 'redis' : 'none',
    },
    'etagere primary started',
  );

  return {
    adminUrl: urlOf(addr),
    reload: reloads.reload,
    async close() {
      draining = true;
      reloads.close();
      clearInterval(pushTimer);
      const exits = Object.values(cluster.workers ?? {})
        .filter((w): w is Worker => w !== undefined)
        .map(
          (w) => new Promise<void>((resolve) => (w.isDead() ? resolve() : (w.once('exit', () => resolve()), w.process.kill('SIGTERM')))),
        );
      await Promise.all(exits);
      poolRt?.close();
      admin.closeAllConnections();
      await closed(admin);
      logger.flush?.();
    },
  };
}

/**
 * Asks every live worker one question (the metrics' JSON, a cache call) and waits up to 2 s for
 * each answer; a worker that does not answer in time is left out.
 */
async function askEveryWorker<Reply>(
  question: (id: number) => Control,
  replies: Map<number, (value: unknown) => void>,
  nextId: () => number,
): Promise<Reply[]> {
  const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());
  const answers = await Promise.all(
    workers.map(
      (worker) =>
        new Promise<Reply | undefined>((resolve) => {
          const id = nextId();
          const timer = setTimeout(() => {
            replies.delete(id);
            resolve(undefined);
          }, 2_000);
          replies.set(id, (value) => {
            clearTimeout(timer);
            resolve(value as Reply);
          });
          worker.send(question(id), ignoreSendError);
        }),
    ),
  );
  return answers.flatMap((answer) => (answer === undefined ? [] : [answer as Reply]));
}

/**
 * A worker: a full proxy without its own admin listener, answering the primary's questions. Its
 * IPC pool starts with the configured tokens; the primary's members (GitHub App installation
 * tokens included) come before its first lease.
 */
export async function runWorker(config: Config): Promise<App> {
  const pool = ipcBudget(config)
    ? createIpcTokenPool(
        process as unknown as Parameters<typeof createIpcTokenPool>[0],
        config.pool.tokens.map((t) => tokenName(t.value, t.name)),
        config.pool.equivalent,
        new Map(config.pool.tokens.map((t) => [tokenName(t.value, t.name), `token ${t.value}`])),
      )
    : undefined;
  const app = await startApp(config, { adminListener: false, watchTokensFile: false, ...(pool === undefined ? {} : { pool }) });
  process.on('message', (message: unknown) => {
    if (isControl(message) && message.t === 'etagere:reload') void app.reloadTokens(message.trigger);
    if (isControl(message) && message.t === 'etagere:reload-keys') app.reloadConsumerKeys('signal');
    if (isControl(message) && message.t === 'etagere:cache') {
      const { id, call } = message;
      void Promise.resolve(app.cacheAdmin(call)).then((answer) =>
        process.send?.({ t: 'etagere:cache-reply', id, answer } satisfies Control, undefined, undefined, ignoreSendError),
      );
    }
    if (isControl(message) && message.t === 'etagere:quota')
      process.send?.(
        { t: 'etagere:quota-reply', id: message.id, rows: app.metrics.quota.rows(message.window) } satisfies Control,
        undefined,
        undefined,
        ignoreSendError,
      );
    if (!isControl(message) || message.t !== 'etagere:metrics') return;
    app.metrics.registry.getMetricsAsJSON().then(
      (json) =>
        process.send?.({ t: 'etagere:metrics-reply', id: message.id, json } satisfies Control, undefined, undefined, ignoreSendError),
      () =>
        process.send?.({ t: 'etagere:metrics-reply', id: message.id, json: [] } satisfies Control, undefined, undefined, ignoreSendError),
    );
  });
  const push = (): void =>
    void process.send?.(
      {
        t: 'etagere:recent',
        summary: app.metrics.recent.summary(),
        redisUp: app.redisUp(),
        tokens: pool === undefined ? app.tokens() : [],
        poolReady: app.poolReady(),
      } satisfies Control,
      undefined,
      undefined,
      ignoreSendError,
    );
  push();
  const timer = setInterval(push, 1_000);
  timer.unref();
  return app;
}

export { cluster };
