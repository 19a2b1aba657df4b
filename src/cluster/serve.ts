/**
 * Multi-core serving (`workers: N` or `auto`) with node:cluster. Each worker is a full proxy
 * with its own L1 and shares the listening socket (the kernel spreads connections: SCHED_NONE).
 * The primary process serves the admin port for the whole machine: health, readiness (every
 * worker listening), /metrics aggregated over the workers, the status page and /admin/tokens.
 * With Redis, workers share L2, the token budget and single flight through it, like replicas;
 * without Redis, the primary owns the token budget and workers lease tokens over IPC
 * (ipc-pool.ts), so one machine never overspends. A worker that dies is replaced.
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import { AggregatorRegistry, type Registry } from 'prom-client';
import { startApp, type App } from '../app.js';
import type { Config } from '../config/schema.js';
import { createLogger, type Logger } from '../log/logger.js';
import type { RecentSummary } from '../metrics/recent.js';
import { createMetrics } from '../metrics/registry.js';
import { createAdminServer } from '../server/admin.js';
import { closed, listen, urlOf } from '../server/listen.js';
import { buildPool } from '../services.js';
import { tokenName } from '../tokens/name.js';
import type { TokenReport } from '../tokens/types.js';
import { createUpstreamClient } from '../upstream/client.js';
import { createIpcTokenPool, servePool } from '../tokens/ipc-pool.js';

/** How many workers `workers` asks for on this machine. */
export function workerCount(workers: Config['workers']): number {
  return workers === 'auto' ? Math.max(1, availableParallelism()) : workers;
}

/** Whether the token budget goes through the primary (no Redis to share it). */
function ipcBudget(config: Config): boolean {
  const redis = config.redis.url !== null || config.redis.cluster !== null;
  return config.pool.tokens.length > 0 && (!redis || !config.redis.shared_tokens);
}

type Control =
  | { t: 'etagere:metrics'; id: number }
  | { t: 'etagere:metrics-reply'; id: number; json: unknown[] }
  /** Pushed by every worker each second: its recent activity, its Redis state and (with Redis) its view of the pool. */
  | { t: 'etagere:recent'; summary: RecentSummary; redisUp: boolean | null; tokens: TokenReport[] };

const isControl = (message: unknown): message is Control =>
  typeof message === 'object' &&
  message !== null &&
  String((message as { t?: unknown }).t).startsWith('etagere:') &&
  (message as { t: string }).t !== 'etagere:pool';

export interface ClusterPrimary {
  readonly adminUrl: string;
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

export async function runPrimary(config: Config, logger: Logger = createLogger({ level: config.log.level })): Promise<ClusterPrimary> {
  const clusterSize = workerCount(config.workers);
  const metrics = createMetrics();
  // Without Redis to share it, the primary owns the token budget: a pool of its own (no Redis).
  const poolRt = ipcBudget(config) ? buildPool(config, { logger, metrics }) : undefined;
  const probeTarget = config.upstreams.find((u) => u.token_pool);
  if (poolRt !== undefined && probeTarget !== undefined && config.pool.probe_at_start) {
    const client = createUpstreamClient(probeTarget);
    await poolRt.probe(client);
    await client.close();
  }

  cluster.schedulingPolicy = cluster.SCHED_NONE;
  let draining = false;
  const listening = new Set<number>();
  const recent = new Map<number, Extract<Control, { t: 'etagere:recent' }>>();
  const pools = new Map<number, ReturnType<typeof servePool>>();
  const replies = new Map<number, (json: unknown[]) => void>();
  let seq = 0;

  const fork = (): Worker => {
    const worker = cluster.fork({ ETAGERE_WORKER: '1' });
    if (poolRt !== undefined) pools.set(worker.id, servePool(poolRt.pool, worker));
    worker.on('listening', () => listening.add(worker.id));
    worker.on('message', (message: unknown) => {
      if (!isControl(message)) return;
      if (message.t === 'etagere:recent') recent.set(worker.id, message);
      else if (message.t === 'etagere:metrics-reply') {
        replies.get(message.id)?.(message.json);
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

  /** Every worker's registry as JSON, plus the primary's (the pool's gauges), summed by prom-client. */
  const metricsText = async (): Promise<string> => {
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());
    const parts = await Promise.all(
      workers.map(
        (worker) =>
          new Promise<unknown[]>((resolve) => {
            const id = ++seq;
            const timer = setTimeout(() => {
              replies.delete(id);
              resolve([]);
            }, 2_000);
            replies.set(id, (json) => {
              clearTimeout(timer);
              resolve(json);
            });
            worker.send({ t: 'etagere:metrics', id } satisfies Control);
          }),
      ),
    );
    const own = await metrics.registry.getMetricsAsJSON();
    const registry: Registry = AggregatorRegistry.aggregate([...parts, own] as object[]);
    return registry.metrics();
  };

  const admin = createAdminServer(metrics, {
    allowedHosts: config.admin.allowed_hosts,
    ready: () => !draining && listening.size === clusterSize,
    // Without Redis the primary holds the pool; with it, every worker sees the shared numbers.
    tokens: () => poolRt?.pool.snapshot() ?? (config.pool.tokens.length === 0 ? undefined : ([...recent.values()][0]?.tokens ?? [])),
    budget: () => (config.pool.tokens.length === 0 ? undefined : { shared: poolRt === undefined, replicas: clusterSize }),
    redis: () => ({
      configured: config.redis.url !== null || config.redis.cluster !== null,
      up: recent.size > 0 && [...recent.values()].every((r) => r.redisUp === true),
    }),
    metricsText,
    recent: () => sumRecent([...recent.values()].map((r) => r.summary)),
  });
  const addr = await listen(admin, config.admin.port, config.admin.host);
  logger.info(
    {
      workers: clusterSize,
      admin: urlOf(addr),
      budget: poolRt !== undefined ? 'primary (IPC)' : config.pool.tokens.length > 0 ? 'redis' : 'none',
    },
    'etagere primary started',
  );

  return {
    adminUrl: urlOf(addr),
    async close() {
      draining = true;
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

/** A worker: a full proxy without its own admin listener, answering the primary's questions. */
export async function runWorker(config: Config): Promise<App> {
  const pool = ipcBudget(config)
    ? createIpcTokenPool(
        process as unknown as Parameters<typeof createIpcTokenPool>[0],
        config.pool.tokens.map((t) => tokenName(t.value, t.name)),
        config.pool.equivalent,
        new Map(config.pool.tokens.map((t) => [tokenName(t.value, t.name), `token ${t.value}`])),
      )
    : undefined;
  const app = await startApp(config, { adminListener: false, ...(pool === undefined ? {} : { pool }) });
  process.on('message', (message: unknown) => {
    if (!isControl(message) || message.t !== 'etagere:metrics') return;
    app.metrics.registry.getMetricsAsJSON().then(
      (json) => process.send?.({ t: 'etagere:metrics-reply', id: message.id, json } satisfies Control),
      () => process.send?.({ t: 'etagere:metrics-reply', id: message.id, json: [] } satisfies Control),
    );
  });
  const push = (): void =>
    void process.send?.({
      t: 'etagere:recent',
      summary: app.metrics.recent.summary(),
      redisUp: app.redisUp(),
      tokens: pool === undefined ? app.tokens() : [],
    } satisfies Control);
  push();
  const timer = setInterval(push, 1_000);
  timer.unref();
  return app;
}

export { cluster };
