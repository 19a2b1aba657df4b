/**
 * A real Redis for tests that need one. `startRedis()` obtains it, in this order:
 *
 *   1. `REDIS_URL` is set: that server is used as is (kind 'env'; `stop()` leaves it alone).
 *   2. Otherwise: a `redis-server` child process on a free 127.0.0.1 port, without persistence
 *      (kind 'process'). Only this kind can be signalled (SIGKILL, SIGSTOP...) and restarted on
 *      the same port, which is what the failure tests need.
 *
 * `startRedisCluster()` always spawns three local cluster-enabled `redis-server` processes and
 * joins them with `redis-cli --cluster create`.
 *
 * Every spawned child is SIGKILLed when the test process exits, so a crashed run leaves no
 * orphan. Waiting is always polling with a deadline, never a fixed sleep.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/platform/config/load.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import { createRedisConnection, type RedisConnection } from '../../src/platform/redis/connection.js';
import { pickPort } from './ports.js';

export interface TestRedis {
  url: string; // e.g. redis://127.0.0.1:41234
  /** How it was obtained: 'env' (REDIS_URL) or 'process' (spawned redis-server). */
  kind: 'env' | 'process';
  /** Sends a signal to the redis-server child process ('process' kind only; throws otherwise). */
  signal(sig: 'SIGKILL' | 'SIGSTOP' | 'SIGCONT' | 'SIGTERM'): void;
  /** Starts redis-server again on the SAME port after it was killed ('process' kind only); resolves when it answers PING. */
  restart(): Promise<void>;
  stop(): Promise<void>; // idempotent; kills the child; for 'env' it does nothing
}

export interface TestRedisCluster {
  /** Seed nodes, e.g. [{ host: '127.0.0.1', port: 40001 }, ...] */
  nodes: Array<{ host: string; port: number }>;
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
/** Base arguments of every spawned server: loopback only, nothing written to disk. */
const BASE_ARGS = ['--bind', HOST, '--save', '', '--appendonly', 'no'];
const MISSING = 'redis-server was not found on PATH: install it (apt-get install redis-server) or set REDIS_URL to an existing Redis';

export interface StartRedisOptions {
  /**
   * Allow the DEBUG command (e.g. `DEBUG SLEEP 0.5` to make Redis slow): Redis 7 refuses it
   * unless started with `--enable-debug-command yes`. Applies to spawned servers; a REDIS_URL
   * server is used as it is configured.
   */
  debugCommand?: boolean;
}

export async function startRedis(opts: StartRedisOptions = {}): Promise<TestRedis> {
  const kind = await redisKind();
  const extra = opts.debugCommand === true ? ['--enable-debug-command', 'yes'] : [];
  if (kind === 'env') return fromEnv(process.env.REDIS_URL ?? '');
  return fromProcess(extra);
}

/**
 * The kind `startRedis()` will give in this process, without starting anything. Useful for
 * `it.skipIf((await redisKind()) !== 'process')` at collection time.
 */
export async function redisKind(): Promise<TestRedis['kind']> {
  return Promise.resolve(process.env.REDIS_URL ? 'env' : 'process');
}

export async function startRedisCluster(): Promise<TestRedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'etagere-redis-cluster-'));
  liveDirs.add(dir);
  const servers: Server[] = [];
  const stop = once(async () => {
    await Promise.all(servers.map((s) => s.kill()));
    await rm(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
  });
  try {
    const taken = new Set<number>(); // ports (and bus ports) already given to a node
    for (let i = 0; i < 3; i++) {
      const server = await launch(
        (port) => [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          `nodes-${port}.conf`, // relative to --dir
          '--cluster-node-timeout',
          '2000',
          '--dir',
          dir,
        ],
        () => freeClusterPort(taken),
      );
      servers.push(server);
      taken.add(server.port).add(server.port + 10_000);
    }
    const addresses = servers.map((s) => `${HOST}:${s.port}`);
    await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes']);
    // `--cluster create` returns once slots are assigned; the state turns ok a little later.
    await until(10_000, 'cluster_state:ok on every node', async () => {
      const infos = await Promise.all(servers.map((s) => ask(s.port, 'CLUSTER INFO')));
      return infos.every((info) => info?.includes('cluster_state:ok') === true);
    });
    return { nodes: servers.map((s) => ({ host: HOST, port: s.port })), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// The three kinds

function fromEnv(url: string): TestRedis {
  return {
    url,
    kind: 'env',
    signal: () => notProcess('env'),
    restart: async () => notProcess('env'),
    stop: async () => {},
  };
}

async function fromProcess(extraArgs: string[]): Promise<TestRedis> {
  let server = await launch(() => extraArgs, freePort);
  const port = server.port;
  let stopped = false;
  return {
    url: `redis://${HOST}:${port}`,
    kind: 'process',
    signal(sig) {
      if (stopped) throw new Error('signal(): this Redis was stopped');
      server.child.kill(sig);
    },
    async restart() {
      if (stopped) throw new Error('restart(): this Redis was stopped');
      await server.kill(); // no-op when it already died; makes sure the port is released
      server = await spawnServer(port, extraArgs);
    },
    stop: once(async () => {
      stopped = true;
      await server.kill();
    }),
  };
}

function notProcess(kind: TestRedis['kind']): never {
  throw new Error(`only a spawned redis-server (kind 'process') can be signalled or restarted; this one is '${kind}'`);
}

// ---------------------------------------------------------------------------------------------
// Spawned redis-server processes

interface Server {
  port: number;
  child: ChildProcess;
  /** SIGKILLs the child (if still alive) and resolves once it has exited. */
  kill(): Promise<void>;
}

/** Children still alive, SIGKILLed on process exit; cluster tmp dirs not yet removed. */
const live = new Set<ChildProcess>();
const liveDirs = new Set<string>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * Spawns a server on a port from `pickPort`; if it dies before answering PING (most likely the
 * port was taken between the check and the bind), tries again on another port.
 */
async function launch(extraArgs: (port: number) => string[], pickPort: () => Promise<number>): Promise<Server> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await pickPort();
    try {
      return await spawnServer(port, extraArgs(port));
    } catch (err) {
      if (err instanceof Error && err.message === MISSING) throw err;
      lastError = err;
    }
  }
  throw lastError;
}

/** Spawns redis-server on `port` and resolves once it answers PING (deadline 5 s). */
async function spawnServer(port: number, extraArgs: string[]): Promise<Server> {
  const child = spawn('redis-server', ['--port', String(port), ...BASE_ARGS, ...extraArgs], {
    cwd: tmpdir(), // should anything be written after all, never into the repository
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // The last few KB of output, for the error message when it fails to start.
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString()).slice(-4_096);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  // Neither the child nor its pipes keep the test process alive (the exit handler kills it).
  child.unref();
  for (const stream of [child.stdout, child.stderr]) (stream as unknown as { unref?: () => void } | null)?.unref?.();

  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      live.delete(child);
      resolve();
    }),
  );
  const dead = (): boolean => child.exitCode !== null || child.signalCode !== null;
  const server: Server = {
    port,
    child,
    async kill() {
      if (!dead()) child.kill('SIGKILL');
      await exited;
    },
  };

  // 'error' (ENOENT: no such binary) or 'spawn', whichever comes first.
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', (err: NodeJS.ErrnoException) => reject(err.code === 'ENOENT' ? new Error(MISSING) : err));
  });
  live.add(child);

  try {
    await until(5_000, `redis-server on port ${port} to answer PING`, async () => {
      if (dead()) throw new Error(`redis-server on port ${port} exited before answering PING:\n${output}`);
      return (await ask(port, 'PING'))?.startsWith('+PONG') === true;
    });
  } catch (err) {
    await server.kill();
    throw err;
  }
  return server;
}

// ---------------------------------------------------------------------------------------------
// Small utilities

/** Polls `check` every ~20 ms until it returns true; throws after `ms`. */
async function until(ms: number, what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Sends one inline command over raw TCP and returns the raw reply (a simple string, an error or
 * a bulk string), or undefined if the server cannot be reached within 500 ms.
 */
function ask(port: number, command: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    let reply = '';
    const socket = connect(port, HOST);
    const done = (value: string | undefined): void => {
      socket.destroy();
      resolve(value);
    };
    socket.setTimeout(500, () => done(undefined));
    socket.on('error', () => done(undefined));
    socket.on('close', () => done(undefined)); // closed without a (complete) reply
    socket.on('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString();
      const headerEnd = reply.indexOf('\r\n');
      if (headerEnd < 0) return;
      if (!reply.startsWith('$')) return done(reply); // +OK / -ERR / :1: one line
      const length = Number(reply.slice(1, headerEnd));
      if (Buffer.byteLength(reply) >= headerEnd + 2 + length + 2) done(reply);
    });
  });
}

/** A port free on 127.0.0.1 right now (bound to 0, then released). */
function freePort(): Promise<number> {
  return pickPort();
}

/** Whether `port` can be bound on 127.0.0.1 right now. */
async function isFree(port: number): Promise<boolean> {
  const server = createServer();
  const ok = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => resolve(true));
  });
  if (ok) await new Promise<void>((resolve) => server.close(() => resolve()));
  return ok;
}

/** A free port whose cluster bus port (+10000) is free too and not already `taken`. */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = await freePort();
    if (port > 55_535 || taken.has(port) || taken.has(port + 10_000)) continue;
    if (await isFree(port + 10_000)) return port;
  }
  throw new Error('found no free port pair (port, port+10000) for a cluster node');
}

/** Runs a command to completion (15 s at most); the error carries its output. */
function run(file: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 15_000 }, (err, stdout, stderr) => {
      if (!err) return resolve();
      const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
      reject(
        new Error(
          missing
            ? `${file} was not found on PATH: install it (apt-get install redis-server)`
            : `${file} ${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}`,
        ),
      );
    });
  });
}

/** Wraps an async function so that it runs once; later calls get the same promise. */
function once(fn: () => Promise<void>): () => Promise<void> {
  let result: Promise<void> | undefined;
  return () => (result ??= fn());
}

/**
 * The proxy's own Redis connection (src/platform/redis/connection.ts) to a test server, once it is up:
 * `redis` holds the `redis` config keys to set (url or cluster, key_prefix, timeouts ...).
 */
export async function connectProxyRedis(redis: Record<string, unknown>): Promise<RedisConnection> {
  const config = parseConfig({ upstreams: [{ name: 'github', prefix: '/', url: 'http://127.0.0.1:9' }], redis });
  const conn = createRedisConnection(config.redis, createLogger({ level: 'silent' }), createMetrics({ defaultMetrics: false }));
  if (conn === undefined) throw new Error('connectProxyRedis needs redis.url or redis.cluster');
  const deadline = Date.now() + 10_000;
  while (!conn.up() && Date.now() < deadline) await new Promise<void>((resolve) => setTimeout(resolve, 20));
  if (!conn.up()) throw new Error('the proxy connection to the test Redis did not come up within 10 s');
  return conn;
}
