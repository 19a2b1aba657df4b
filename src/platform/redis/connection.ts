/**
 * The Redis connection (a single node or a Cluster), made so that Redis can never be a way to
 * fail: no offline queue (a command while disconnected fails at once), one retry per request, a
 * short command timeout, bounded reconnect backoff, an error listener, and a circuit breaker in
 * front of every call. `run` turns every failure into `undefined` (a miss, a skipped write),
 * counted by operation.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { RedisConfig } from '../config/schema.js';
import type { Logger } from '../log/logger.js';
import { LabelSets } from '../metrics/labels.js';
import type { Metrics } from '../metrics/registry.js';
import { createBreaker } from './breaker.js';

export type RedisClient = Redis | Cluster;

export interface RedisConnection {
  readonly client: RedisClient;
  /** Key prefix plus schema version, e.g. "etagere:v1:". */
  readonly prefix: string;
  readonly cluster: boolean;
  /** Runs one Redis operation; any failure (or an open breaker) gives undefined. */
  run<T>(op: string, fn: (client: RedisClient) => Promise<T>): Promise<T | undefined>;
  /**
   * `run` for a read a client request waits on (the L2 lookup): undefined as well when Redis has
   * not answered within `lookup_timeout_ms` (longer while Redis has been slow, see `patience`). The command goes on (up to `command_timeout_ms`)
   * and its outcome is counted and fed to the breaker as usual; only the caller stops waiting.
   */
  read<T>(op: string, fn: (client: RedisClient) => Promise<T>): Promise<T | undefined>;
  /** Connected and the breaker closed. */
  up(): boolean;
  /** A second connection for subscriptions (created on first use). */
  subscriber(): RedisClient;
  close(): Promise<void>;
}

/** Bumped when the stored layout changes: old keys are then simply never read. */
export const SCHEMA_VERSION = 'v1';
/** Successful commands seen before a lookup may give up sooner than the command timeout. */
const WARM_SAMPLES = 20;

/** Reconnect delay: 50 ms doubling, capped at 500 ms. */
export function reconnectDelay(attempt: number): number {
  return Math.min(50 * 2 ** Math.min(attempt, 10), 500);
}

/**
 * Scripts defined without a fixed number of keys (pool/backends/shared-pool.ts, pool/consumers/consumer-ledger.ts):
 * their first argument is the key count. On a Cluster, ioredis groups auto-pipelined commands by
 * the slot of the first key, which it finds by name for Redis's own commands (EVAL included) but
 * takes as the first argument for defined ones: these landed in another slot's pipeline, which then
 * failed as a whole ("All keys in the pipeline should belong to the same slots allocation group"),
 * L2 lookups included. They are sent on their own instead (test/integration/redis-cluster-pipelining.test.ts).
 */
export const NOT_KEY_FIRST: readonly string[] = ['etagereRead', 'etagereConsumerSpend', 'etagereConsumerRefund'];

/** A timer this late means the event loop was held up, not that Redis was slow. */
const HELD_UP_MS = 50;

/**
 * A command's answer, or a timeout error once `ms` have passed without one while this process was
 * responsive. After the event loop was held up (a burst of requests, a GC pause), expired timers
 * run before the socket is read, and auto-pipelined commands are not even sent yet: ioredis's own
 * commandTimeout failed commands a healthy Redis had answered, the breaker opened, and replicas went
 * on without Redis. A timer that fires late by more than half its time and HELD_UP_MS (the loop
 * was held up) gives the command its window again; ioredis's commandTimeout stays as the backstop.
 */
function answeredWithin<T>(command: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    let due = Date.now() + ms;
    const check = (): void => {
      if (Date.now() - due > Math.max(ms / 2, HELD_UP_MS)) {
        due = Date.now() + ms;
        timer = setTimeout(check, ms);
        return;
      }
      // Only after the following poll phase: a reply that has arrived but is not read yet counts.
      setImmediate(() => reject(new Error('Command timed out')));
    };
    let timer = setTimeout(check, ms);
    command.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/** A client with the settings above. `queue`: let commands wait for the connection (the subscriber only: its SUBSCRIBE is replayed on reconnect). */
function makeClient(cfg: RedisConfig, queue: boolean): RedisClient {
  const options: RedisOptions = {
    enableOfflineQueue: queue,
    maxRetriesPerRequest: 1,
    // A backstop only: `run` times commands out itself (see `answeredWithin`).
    commandTimeout: Math.max(1_000, 5 * cfg.command_timeout_ms),
    connectTimeout: cfg.connect_timeout_ms,
    retryStrategy: (times: number) => reconnectDelay(times),
    lazyConnect: false,
    // Commands issued in the same tick go out in one write: many concurrent L2 lookups cost a
    // fraction of the syscalls and parser passes.
    enableAutoPipelining: true,
  };
  if (cfg.cluster === null) return new Redis(cfg.url!, options);
  const nodes = cfg.cluster.map((node) => {
    const colon = node.lastIndexOf(':');
    return { host: node.slice(0, colon), port: Number(node.slice(colon + 1)) };
  });
  const clusterOptions: ClusterOptions = {
    enableOfflineQueue: queue,
    enableAutoPipelining: true,
    autoPipeliningIgnoredCommands: [...NOT_KEY_FIRST],
    clusterRetryStrategy: (times: number) => reconnectDelay(times),
    redisOptions: options,
    slotsRefreshTimeout: cfg.connect_timeout_ms,
  };
  return new Cluster(nodes, clusterOptions);
}

/**
 * How long a request waits for its lookup: lookup_timeout_ms while Redis has been answering
 * quickly, more when it has been slow (4x its recent latency: a busy machine is not a stalled
 * Redis, and giving up there would cost the single flight), and the whole command timeout until
 * enough answers have been seen to tell. `learn` takes the latency of each successful command.
 */
function lookupPatience(cfg: RedisConfig): { learn(ms: number): void; patience(): number } {
  let recentMs = 0; // moving average
  let samples = 0;
  return {
    learn(ms) {
      recentMs = samples === 0 ? ms : recentMs + 0.1 * (ms - recentMs);
      samples++;
    },
    patience: () =>
      samples < WARM_SAMPLES ? cfg.command_timeout_ms : Math.min(cfg.command_timeout_ms, Math.max(cfg.lookup_timeout_ms, 4 * recentMs)),
  };
}

export function createRedisConnection(cfg: RedisConfig, logger: Logger, metrics: Metrics): RedisConnection | undefined {
  if (cfg.url === null && cfg.cluster === null) return undefined;
  const log = logger.child({ component: 'redis' });
  const make = (queue = false): RedisClient => makeClient(cfg, queue);
  const client = make();
  let sub: RedisClient | undefined;
  const breaker = createBreaker(cfg.breaker_failures, cfg.breaker_open_ms);
  let lastErrorLog = 0;
  const onError = (err: Error): void => {
    // Reconnect errors repeat every backoff step: log at most one line every 10 s.
    const now = Date.now();
    if (now - lastErrorLog > 10_000) {
      lastErrorLog = now;
      log.warn({ err: err.message }, 'redis connection error');
    }
  };
  client.on('error', onError);
  client.on('ready', () => {
    metrics.redisUp.set(1);
    log.info('redis ready');
  });
  client.on('end', () => metrics.redisUp.set(0));
  client.on('close', () => metrics.redisUp.set(0));
  metrics.redisUp.set(0);
  const ready = (): boolean => client.status === 'ready';
  // Label children looked up once per (op, result): label resolution is measurable on the L2 hit path.
  const counters = new LabelSets((op, result) => metrics.redisOps.labels(op, result));
  const count = (op: string, result: string): void => counters.of(op, result).inc();
  const timers = new LabelSets((op) => metrics.redisLatency.labels(op));
  const observe = (op: string, seconds: number): void => timers.of(op).observe(seconds);

  const { learn, patience } = lookupPatience(cfg);

  const connection: RedisConnection = {
    client,
    prefix: `${cfg.key_prefix}${SCHEMA_VERSION}:`,
    cluster: cfg.cluster !== null,
    async run(op, fn) {
      const now = Date.now();
      if (!ready() || !breaker.allow(now)) {
        count(op, 'skipped');
        return undefined;
      }
      const started = process.hrtime.bigint();
      try {
        const value = await answeredWithin(fn(client), cfg.command_timeout_ms);
        breaker.success();
        count(op, 'ok');
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        observe(op, seconds);
        learn(seconds * 1e3);
        return value;
      } catch (err) {
        breaker.failure(Date.now());
        count(op, 'error');
        metrics.redisErrors.labels(op).inc();
        onError(err as Error);
        return undefined;
      }
    },
    read(op, fn) {
      const command = connection.run(op, fn);
      const waitMs = patience();
      if (waitMs >= cfg.command_timeout_ms) return command;
      // Given up only after the following poll phase (a reply that has arrived but is not read yet
      // still counts), and only for time this process was responsive (see `answeredWithin`).
      return answeredWithin(command, waitMs).catch(() => undefined);
    },
    up: () => ready() && breaker.state(Date.now()) === 'closed',
    subscriber() {
      if (sub === undefined) {
        const created = make(true);
        created.on('error', onError);
        sub = created;
        return created;
      }
      return sub;
    },
    async close() {
      const quit = async (target: RedisClient): Promise<void> => {
        try {
          await target.quit();
        } catch {
          target.disconnect();
        }
      };
      if (sub !== undefined) await quit(sub);
      await quit(client);
    },
  };
  return connection;
}
