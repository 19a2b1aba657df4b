/**
 * Starting the servers a case targets, each as its own child process on a loopback port:
 * the fake upstream (shared by the whole run), the ceiling server and fresh etagere instances.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as toYaml } from 'yaml';
import { fakeTokenSpec, poolTokensEnv } from './bench-tokens.js';
import { CONSUMER_KEY, type EtagereSpec, type ServerSpec } from './cases.js';
import { LOAD_CPU, pinned, SERVER_CPU } from './pin.js';
import { freePort, httpGet, redisAnswers, spawnServer, type ServerProcess } from './processes.js';

const HOST = '127.0.0.1';
/** Effectively unlimited quotas so that the fake never answers 403/429 during a run. */
const HUGE_LIMIT = '1000000000';
/**
 * How long a server may take to answer its ready URL. Servers start four at a time while others
 * load (the smoke runs them from src/ through tsx, which compiles at start-up); on a slow 2-core VM
 * the 2-worker all-on server (three processes and a redis-server) once needed more than 20 s.
 */
const START_DEADLINE_MS = 60_000;

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
  /** --pin: servers under test on SERVER_CPU, the shared fake on LOAD_CPU. */
  readonly pin: boolean;
}

export interface RunningServer {
  /** Origin the load generator targets. */
  readonly origin: string;
  readonly process: ServerProcess;
  /** Processes whose CPU time (with their descendants') is the case's server CPU: the server, and its own Redis. */
  readonly pids: readonly number[];
}

/** `command args`, on the server side's CPU under --pin. */
function serverCommand(ctx: ServerContext, command: string, args: readonly string[]): { command: string; args: string[] } {
  return pinned(ctx.pin ? SERVER_CPU : undefined, command, args);
}

export function cliArgs(ctx: ServerContext, args: readonly string[]): string[] {
  if (ctx.useDist) {
    const cli = join(ctx.root, 'dist', 'src', 'main', 'cli.js');
    if (!existsSync(cli)) throw new Error('--dist given but dist/src/main/cli.js is missing: run `npm run build` first');
    return [cli, ...args];
  }
  return ['--import', 'tsx', join(ctx.root, 'src', 'main', 'cli.ts'), ...args];
}

export function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ETAGERE_ENV) delete env[name];
  return env;
}

let seq = 0;

/** The fake GitHub API with huge quotas and no added latency. */
export async function startFake(ctx: ServerContext): Promise<RunningServer> {
  const port = await freePort(HOST);
  const origin = `http://${HOST}:${port}`;
  // The fake is on the load side under --pin: a case's misses cost it CPU, but it is not the server under test.
  const command = pinned(ctx.pin ? LOAD_CPU : undefined, process.execPath, [
    ...cliArgs(ctx, [
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
      // Its demo tokens plus generated ones, for the pools of up to 50 tokens (bench/bench-tokens.ts).
      '--tokens',
      fakeTokenSpec(),
    ]),
  ]);
  const proc = await spawnServer({
    name: 'fake-upstream',
    ...command,
    cwd: ctx.root,
    env: cleanEnv(),
    logFile: join(ctx.tmpDir, `fake-upstream-${seq++}.log`),
    readyUrl: `${origin}/__fake/stats`,
    deadlineMs: START_DEADLINE_MS,
  });
  return { origin, process: proc, pids: [proc.pid] };
}

/** Hop-by-hop and per-response headers left out of the recording (Node sets its own). */
const NOT_RECORDED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'date', 'content-length']);

/** The header fields of a reply a ceiling replays: all but NOT_RECORDED, as the upstream spelled them. */
export function recordedHeaders(rawHeaders: readonly string[]): Array<[string, string]> {
  const headers: Array<[string, string]> = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    if (!NOT_RECORDED.has(name.toLowerCase())) headers.push([name, rawHeaders[i + 1] ?? '']);
  }
  return headers;
}

/** Fetches `path` from the fake once and writes it as the ceiling's response file. */
export async function recordResponse(fakeOrigin: string, path: string, file: string): Promise<void> {
  const reply = await httpGet(`${fakeOrigin}${path}`);
  if (reply.status !== 200) throw new Error(`recording ${path} from the fake: expected 200, got ${reply.status}`);
  const headers = recordedHeaders(reply.rawHeaders);
  writeFileSync(file, JSON.stringify({ status: reply.status, headers, body: reply.body.toString('base64') }));
}

async function startCeiling(
  ctx: ServerContext,
  responseFile: string,
  workers: number,
  distinct: { readonly prefix: string; readonly keys: number } | undefined,
): Promise<RunningServer> {
  const port = await freePort(HOST);
  const origin = `http://${HOST}:${port}`;
  const proc = await spawnServer({
    name: workers > 1 ? `ceiling (${workers} workers)` : 'ceiling',
    ...serverCommand(ctx, process.execPath, [
      '--import',
      'tsx',
      join(ctx.root, 'bench', 'servers', 'ceiling.ts'),
      '--host',
      HOST,
      '--port',
      String(port),
      '--response',
      responseFile,
      '--workers',
      String(workers),
      ...(distinct === undefined ? [] : ['--distinct', distinct.prefix, '--keys', String(distinct.keys)]),
    ]),
    cwd: ctx.root,
    env: process.env,
    logFile: join(ctx.tmpDir, `ceiling-${seq++}.log`),
    readyUrl: `${origin}/`,
    deadlineMs: START_DEADLINE_MS,
  });
  return { origin, process: proc, pids: [proc.pid] };
}

/**
 * Whether nginx can run here: on PATH, or installed now with apt-get (Debian/Ubuntu, as root).
 * Returns its path, or undefined (the nginx case is then skipped with a message).
 */
export function ensureNginx(log: (line: string) => void): string | undefined {
  const find = (): string | undefined => {
    const result = spawnSync('sh', ['-c', 'command -v nginx || ls /usr/sbin/nginx 2>/dev/null'], { encoding: 'utf8' });
    const path = result.stdout.trim().split('\n')[0];
    return result.status === 0 && path !== undefined && path.length > 0 ? path : undefined;
  };
  const found = find();
  if (found !== undefined) return found;
  if (process.getuid?.() !== 0 || spawnSync('sh', ['-c', 'command -v apt-get'], { stdio: 'ignore' }).status !== 0) return undefined;
  log('nginx missing: installing it with apt-get (for the nginx proxy_cache case)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  let result = spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'nginx-light'], { env, stdio: 'ignore' });
  if (result.status !== 0) {
    spawnSync('apt-get', ['update', '-qq'], { env, stdio: 'ignore' });
    result = spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'nginx'], { env, stdio: 'ignore' });
  }
  return find();
}

/** nginx proxy_cache in front of the fake: 2 workers, keep-alive upstream, revalidation on. */
async function startNginx(ctx: ServerContext, fakeOrigin: string): Promise<RunningServer> {
  const nginx = ensureNginx(() => undefined);
  if (nginx === undefined) throw new Error('nginx is not installed');
  const port = await freePort(HOST);
  const serial = seq++;
  const dir = join(ctx.tmpDir, `nginx-${serial}`);
  for (const sub of ['', 'cache', 'body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) {
    mkdirSync(join(dir, sub), { recursive: true });
  }
  const fake = new URL(fakeOrigin);
  // As root, workers would switch to "nobody", who cannot enter the run's private temp dir.
  const user = process.getuid?.() === 0 ? 'user root;\n' : '';
  const conf = `# generated by etagere bench
${user}worker_processes 2;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  proxy_cache_path ${dir}/cache levels=1:2 keys_zone=etagere:16m max_size=256m inactive=10m use_temp_path=off;
  upstream fake { server ${fake.host}; keepalive 64; }
  server {
    listen ${HOST}:${port};
    location = /__ready { return 200 "ok"; }
    location / {
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_cache etagere;
      proxy_cache_revalidate on;
      proxy_cache_lock on;
      proxy_cache_use_stale error timeout updating;
      add_header Cache-Status $upstream_cache_status;
    }
  }
}
`;
  const confFile = join(dir, 'nginx.conf');
  writeFileSync(confFile, conf);
  const proc = await spawnServer({
    name: 'nginx',
    ...serverCommand(ctx, nginx, ['-c', confFile, '-p', dir]),
    cwd: dir,
    env: cleanEnv(),
    logFile: join(ctx.tmpDir, `nginx-${serial}.log`),
    readyUrl: `http://${HOST}:${port}/__ready`,
    deadlineMs: START_DEADLINE_MS,
  });
  return { origin: `http://${HOST}:${port}`, process: proc, pids: [proc.pid] };
}

/** A fresh redis-server for one case (no persistence, loopback only). */
export async function startRedisServer(ctx: ServerContext, serial: number): Promise<{ url: string; process: ServerProcess }> {
  const port = await freePort(HOST);
  const proc = await spawnServer({
    name: 'redis-server',
    ...serverCommand(ctx, 'redis-server', ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no']),
    cwd: ctx.tmpDir,
    env: cleanEnv(),
    logFile: join(ctx.tmpDir, `redis-${serial}.log`),
    readyUrl: `redis://${HOST}:${port}`,
    ready: () => redisAnswers(HOST, port),
    deadlineMs: START_DEADLINE_MS,
  });
  return { url: `redis://${HOST}:${port}`, process: proc };
}

/** The generated etagere config of one case. */
function etagereConfig(
  ctx: ServerContext,
  spec: EtagereSpec,
  fakeOrigin: string,
  ports: { port: number; admin: number },
  redisUrl?: string,
) {
  const pool = spec.pool;
  return {
    listen: { host: HOST, port: ports.port },
    admin: { host: HOST, port: ports.admin },
    log: { level: spec.logLevel ?? ctx.logLevel },
    workers: spec.workers ?? 1,
    upstreams: [{ name: 'github', prefix: '/', url: fakeOrigin, cache: spec.cache, token_pool: pool !== undefined }],
    ...(pool === undefined ? {} : { pool: { equivalent: pool.equivalent } }),
    ...(spec.consumerKeys === true ? { consumers: { enabled: true, keys: [{ name: CONSUMER_KEY.name, value: CONSUMER_KEY.value }] } } : {}),
    // required: /readyz waits for the Redis connection, so the case starts with Redis up.
    ...(redisUrl === undefined ? {} : { redis: { url: redisUrl, required: true }, cache: { l1: spec.redis?.l1 ?? true } }),
  };
}

async function startEtagere(ctx: ServerContext, fakeOrigin: string, spec: EtagereSpec): Promise<RunningServer> {
  const [port, adminPort] = [await freePort(HOST), await freePort(HOST)];
  const serial = seq++;
  const redis = spec.redis === undefined ? undefined : await startRedisServer(ctx, serial);
  const config = etagereConfig(ctx, spec, fakeOrigin, { port, admin: adminPort }, redis?.url);
  const configFile = join(ctx.tmpDir, `etagere-${serial}.yaml`);
  writeFileSync(configFile, `# generated by etagere bench\n${toYaml(config)}`);
  let proc: ServerProcess;
  try {
    proc = await spawnServer({
      name: `etagere (policy ${spec.cache.policy})`,
      // `root`: another checkout's etagere (--before), with that checkout's modules.
      ...serverCommand(ctx, process.execPath, cliArgs({ ...ctx, root: spec.root ?? ctx.root }, ['serve', '--config', configFile])),
      cwd: spec.root ?? ctx.root,
      // Pool cases: the fake's tokens (never real ones), through the environment.
      env: spec.pool === undefined ? cleanEnv() : { ...cleanEnv(), ETAGERE_TOKENS: poolTokensEnv(spec.pool.tokens) },
      logFile: join(ctx.tmpDir, `etagere-${serial}.log`),
      // The access log (one JSON line per request at info) goes to /dev/null: its serialization
      // and write(2) are measured, disk writeback is not. Start-up errors arrive on stderr.
      discardStdout: true,
      readyUrl: `http://${HOST}:${adminPort}/readyz`,
      deadlineMs: START_DEADLINE_MS,
    });
  } catch (err) {
    await redis?.process.stop();
    throw err;
  }
  const origin = `http://${HOST}:${port}`;
  if (redis === undefined) return { origin, process: proc, pids: [proc.pid] };
  const both: ServerProcess = {
    ...proc,
    stop: async () => {
      await proc.stop();
      await redis.process.stop();
    },
  };
  return { origin, process: both, pids: [proc.pid, redis.process.pid] };
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
      return startCeiling(ctx, responseFile, spec.workers ?? 1, spec.distinct);
    case 'nginx':
      return startNginx(ctx, fake.origin);
    case 'fake-upstream':
      return { origin: fake.origin, process: { ...fake.process, stop: () => Promise.resolve() }, pids: fake.pids };
    case 'etagere':
      return startEtagere(ctx, fake.origin, spec);
  }
}
