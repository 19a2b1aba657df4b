/**
 * Starting the servers a case targets, each as its own child process on a loopback port:
 * the fake upstream (shared by the whole run), the ceiling server and fresh etagere instances.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as toYaml } from 'yaml';
import type { CacheYaml, ServerSpec } from './cases.js';
import { freePort, httpGet, redisAnswers, spawnServer, type ServerProcess } from './processes.js';

const HOST = '127.0.0.1';
/** Effectively unlimited quotas so that the fake never answers 403/429 during a run. */
const HUGE_LIMIT = '1000000000';
const START_DEADLINE_MS = 20_000;

/** Environment variables that would override the generated etagere config. */
const ETAGERE_ENV = [
  'ETAGERE_CONFIG',
  'PORT',
  'HOST',
  'ADMIN_PORT',
  'ADMIN_HOST',
  'PUBLIC_URL',
  'REDIS_URL',
  'ETAGERE_TOKENS',
  'UPSTREAM_URL',
  'LOG_LEVEL',
  'ETAGERE_PARTITION_SECRET',
];

export interface ServerContext {
  /** Project root (cwd of every child). */
  readonly root: string;
  /** Per-run temp directory: configs, recorded response, logs, wrk scripts. */
  readonly tmpDir: string;
  /** Run the CLI from dist/ (after `npm run build`) instead of from source through tsx. */
  readonly useDist: boolean;
  /** etagere's log.level (info logs one access line per request, as in production). */
  readonly logLevel: string;
}

export interface RunningServer {
  /** Origin the load generator targets. */
  readonly origin: string;
  readonly process: ServerProcess;
}

function cliArgs(ctx: ServerContext, args: readonly string[]): string[] {
  if (ctx.useDist) {
    const cli = join(ctx.root, 'dist', 'cli.js');
    if (!existsSync(cli)) throw new Error('--dist given but dist/cli.js is missing: run `npm run build` first');
    return [cli, ...args];
  }
  return ['--import', 'tsx', join(ctx.root, 'src', 'cli.ts'), ...args];
}

function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of ETAGERE_ENV) delete env[k];
  return env;
}

let seq = 0;

/** The fake GitHub API with huge quotas and no added latency. */
export async function startFake(ctx: ServerContext): Promise<RunningServer> {
  const port = await freePort(HOST);
  const origin = `http://${HOST}:${port}`;
  const proc = await spawnServer({
    name: 'fake-upstream',
    command: process.execPath,
    args: cliArgs(ctx, [
      'fake-upstream',
      '--host',
      HOST,
      '--port',
      String(port),
      '--anon-limit',
      HUGE_LIMIT,
      '--token-limit',
      HUGE_LIMIT,
      '--latency-ms',
      '0',
    ]),
    cwd: ctx.root,
    env: cleanEnv(),
    logFile: join(ctx.tmpDir, `fake-upstream-${seq++}.log`),
    readyUrl: `${origin}/__fake/stats`,
    deadlineMs: START_DEADLINE_MS,
  });
  return { origin, process: proc };
}

/** Hop-by-hop and per-response headers left out of the recording (Node sets its own). */
const NOT_RECORDED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'date', 'content-length']);

/** Fetches `path` from the fake once and writes it as the ceiling's response file. */
export async function recordResponse(fakeOrigin: string, path: string, file: string): Promise<void> {
  const reply = await httpGet(`${fakeOrigin}${path}`);
  if (reply.status !== 200) throw new Error(`recording ${path} from the fake: expected 200, got ${reply.status}`);
  const headers: Array<[string, string]> = [];
  for (let i = 0; i + 1 < reply.rawHeaders.length; i += 2) {
    const name = reply.rawHeaders[i] ?? '';
    if (!NOT_RECORDED.has(name.toLowerCase())) headers.push([name, reply.rawHeaders[i + 1] ?? '']);
  }
  writeFileSync(file, JSON.stringify({ status: reply.status, headers, body: reply.body.toString('base64') }));
}

async function startCeiling(ctx: ServerContext, responseFile: string): Promise<RunningServer> {
  const port = await freePort(HOST);
  const origin = `http://${HOST}:${port}`;
  const proc = await spawnServer({
    name: 'ceiling',
    command: process.execPath,
    args: ['--import', 'tsx', join(ctx.root, 'bench', 'servers', 'ceiling.ts'), '--host', HOST, '--port', String(port), '--response', responseFile],
    cwd: ctx.root,
    env: process.env,
    logFile: join(ctx.tmpDir, `ceiling-${seq++}.log`),
    readyUrl: `${origin}/`,
    deadlineMs: START_DEADLINE_MS,
  });
  return { origin, process: proc };
}

/** A fresh redis-server for one case (no persistence, loopback only). */
async function startRedisServer(ctx: ServerContext, n: number): Promise<{ url: string; process: ServerProcess }> {
  const port = await freePort(HOST);
  const proc = await spawnServer({
    name: 'redis-server',
    command: 'redis-server',
    args: ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no'],
    cwd: ctx.tmpDir,
    env: cleanEnv(),
    logFile: join(ctx.tmpDir, `redis-${n}.log`),
    readyUrl: `redis://${HOST}:${port}`,
    ready: () => redisAnswers(HOST, port),
    deadlineMs: START_DEADLINE_MS,
  });
  return { url: `redis://${HOST}:${port}`, process: proc };
}

async function startEtagere(
  ctx: ServerContext,
  fakeOrigin: string,
  cache: CacheYaml,
  logLevel: string | undefined,
  pool: boolean,
  redisSpec: { l1: boolean } | undefined,
): Promise<RunningServer> {
  const [port, adminPort] = [await freePort(HOST), await freePort(HOST)];
  const n = seq++;
  const redis = redisSpec === undefined ? undefined : await startRedisServer(ctx, n);
  const config = {
    listen: { host: HOST, port },
    admin: { host: HOST, port: adminPort },
    log: { level: logLevel ?? ctx.logLevel },
    upstreams: [{ name: 'github', prefix: '/', url: fakeOrigin, cache, token_pool: pool }],
    // required: /readyz waits for the Redis connection, so the case starts with Redis up.
    ...(redis === undefined ? {} : { redis: { url: redis.url, required: true }, cache: { l1: redisSpec!.l1 } }),
  };
  const configFile = join(ctx.tmpDir, `etagere-${n}.yaml`);
  writeFileSync(configFile, `# generated by etagere bench\n${toYaml(config)}`);
  const proc = await spawnServer({
    name: `etagere (policy ${cache.policy})`,
    command: process.execPath,
    args: cliArgs(ctx, ['serve', '--config', configFile]),
    cwd: ctx.root,
    // Pool cases: two of the fake's demo tokens (never real ones), through the environment.
    env: pool ? { ...cleanEnv(), ETAGERE_TOKENS: 'bench-a=demo_token_alice_public,bench-b=demo_token_bob_public' } : cleanEnv(),
    logFile: join(ctx.tmpDir, `etagere-${n}.log`),
    // The access log (one JSON line per request at info) goes to /dev/null: its serialization
    // and write(2) are measured, disk writeback is not. Start-up errors arrive on stderr.
    discardStdout: true,
    readyUrl: `http://${HOST}:${adminPort}/readyz`,
    deadlineMs: START_DEADLINE_MS,
  });
  if (redis === undefined) return { origin: `http://${HOST}:${port}`, process: proc };
  const both: ServerProcess = {
    ...proc,
    stop: async () => {
      await proc.stop();
      await redis.process.stop();
    },
  };
  return { origin: `http://${HOST}:${port}`, process: both };
}

/**
 * Starts the server of one case. The fake-upstream case reuses the run's shared fake, whose
 * stop() is a no-op here (the run stops it at the end).
 */
export async function startCaseServer(
  spec: ServerSpec,
  ctx: ServerContext,
  fake: RunningServer,
  responseFile: string,
): Promise<RunningServer> {
  switch (spec.kind) {
    case 'ceiling':
      return startCeiling(ctx, responseFile);
    case 'fake-upstream':
      return { origin: fake.origin, process: { ...fake.process, stop: () => Promise.resolve() } };
    case 'etagere':
      return startEtagere(ctx, fake.origin, spec.cache, spec.logLevel, spec.pool === true, spec.redis);
  }
}
