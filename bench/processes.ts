/**
 * Child processes of a bench run: every server runs in its own process, with its output in a
 * log file under the run's temp directory. Readiness is an HTTP probe with a deadline, and every
 * child is tracked so that it is stopped on exit, on error and on SIGINT/SIGTERM.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

const live = new Set<ChildProcess>();
/** Set once a signal asked the bench to stop: no new child may start after that. */
let stopping = false;

function refuseWhenStopping(name: string): void {
  if (stopping) throw new Error(`not starting ${name}: the bench is stopping`);
}

/** A port the kernel gives once (bound, then released). */
function ephemeralPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = addr !== null && typeof addr === 'object' ? addr.port : 0;
      srv.close(() => (port > 0 ? resolve(port) : reject(new Error('no port assigned'))));
    });
  });
}

/**
 * Ports handed out lately: a port is released before the child binds it, so the kernel may give
 * it again meanwhile (an etagere's listen port came back as its own redis-server's, and the
 * etagere then failed to start: EADDRINUSE). The last HANDED_OUT_KEPT are never handed out twice.
 */
const handedOut: number[] = [];
const HANDED_OUT_KEPT = 256;

/** A free loopback TCP port (bound then released; the child binds it right after), none handed out lately. */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const port = await ephemeralPort(host);
    if (handedOut.includes(port) && attempt < 50) continue;
    handedOut.push(port);
    if (handedOut.length > HANDED_OUT_KEPT) handedOut.shift();
    return port;
  }
}

export interface HttpReply {
  readonly status: number;
  /** Raw header pairs as received, name then value. */
  readonly rawHeaders: readonly string[];
  readonly body: Buffer;
}

/** One plain GET (no Accept-Encoding, like the load generators), with a timeout. */
export function httpGet(url: string, timeoutMs = 2_000, headers: Readonly<Record<string, string>> = {}): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', agent: false, timeout: timeoutMs, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, rawHeaders: res.rawHeaders, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** One POST with a JSON body; resolves with the status. */
export function httpPostJson(url: string, value: unknown, timeoutMs = 2_000): Promise<number> {
  return new Promise((resolve, reject) => {
    const body = Buffer.from(JSON.stringify(value));
    const req = request(
      url,
      {
        method: 'POST',
        agent: false,
        timeout: timeoutMs,
        headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`POST ${url}: timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

export interface SpawnOptions {
  /** Label used in messages. */
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  /** stderr of the child, and stdout unless discardStdout, are appended here. */
  readonly logFile: string;
  /**
   * Send stdout to /dev/null: for servers that log every request, so that megabytes of log
   * written to disk (and their writeback) do not disturb this or later cases.
   */
  readonly discardStdout?: boolean;
  /** URL that answers 2xx once the server is ready. */
  readonly readyUrl: string;
  /** Readiness check instead of the URL (servers that do not speak HTTP). */
  readonly ready?: () => Promise<boolean>;
  readonly deadlineMs: number;
}

export interface ServerProcess {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  /** SIGTERM, then SIGKILL after a grace period. Idempotent. */
  stop(): Promise<void>;
}

function tail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no output)';
  }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

async function terminate(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    const done = await Promise.race([exited(child).then(() => true), sleep(graceMs).then(() => false)]);
    if (!done) {
      child.kill('SIGKILL');
      await exited(child);
    }
  }
  live.delete(child);
}

/** Starts a server process and waits until `readyUrl` answers 2xx, or throws with its log tail. */
export async function spawnServer(options: SpawnOptions): Promise<ServerProcess> {
  refuseWhenStopping(options.name);
  const fd = openSync(options.logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(options.command, [...options.args], {
      cwd: options.cwd,
      env: options.env,
      stdio: ['ignore', options.discardStdout === true ? 'ignore' : fd, fd],
    });
  } finally {
    closeSync(fd);
  }
  live.add(child);
  let spawnError: Error | undefined;
  child.once('error', (err) => (spawnError = err));
  child.once('exit', () => live.delete(child));
  const stop = (): Promise<void> => terminate(child, 3_000);

  const deadline = Date.now() + options.deadlineMs;
  for (;;) {
    if (spawnError !== undefined || child.exitCode !== null || child.signalCode !== null) {
      await stop();
      const why = spawnError?.message ?? `exited with ${child.exitCode ?? child.signalCode}`;
      throw new Error(`${options.name} failed to start (${why}); last output:\n${tail(options.logFile)}`);
    }
    try {
      if (options.ready !== undefined) {
        if (await options.ready()) break;
      } else {
        const reply = await httpGet(options.readyUrl, 500);
        if (reply.status >= 200 && reply.status < 300) break;
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(
        `${options.name} not ready at ${options.readyUrl} within ${options.deadlineMs} ms; last output:\n${tail(options.logFile)}`,
      );
    }
    await sleep(50);
  }
  return { name: options.name, pid: child.pid ?? -1, logFile: options.logFile, stop };
}

/** Tracks a non-server child (e.g. the load generator) so that cleanup also stops it. */
export function track(child: ChildProcess): void {
  if (stopping) child.kill('SIGKILL');
  live.add(child);
  child.once('exit', () => live.delete(child));
}

/** Stops every live child: SIGTERM, then SIGKILL after the grace period. */
export async function stopAll(graceMs = 3_000): Promise<void> {
  await Promise.all([...live].map((c) => terminate(c, graceMs)));
}

let installed = false;

/**
 * Makes sure children never outlive the bench: SIGINT/SIGTERM stop them and exit 130/143, and
 * a last-resort synchronous SIGKILL runs on process exit.
 */
export function installCleanup(onSignal: (signal: NodeJS.Signals) => void = () => undefined): void {
  if (installed) return;
  installed = true;
  const handler = (signal: NodeJS.Signals): void => {
    stopping = true;
    onSignal(signal);
    void stopAll(1_000).finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
  process.once('exit', () => {
    for (const child of live) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
}

/** Whether a Redis answers PING on host:port (within 500 ms). */
export function redisAnswers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (d: Buffer) => done(d.toString().startsWith('+PONG')));
  });
}
