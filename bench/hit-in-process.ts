/**
 * The hit path in process: etagere's request listener and the ceiling's (writeHead + end of a
 * recorded response), each given requests built in memory on sockets that keep nothing. No
 * kernel, no load generator sharing the cores: what is left is the JavaScript of a hit (etagere's
 * steps and Node's response code), per request, which a wrk run mixes with the kernel's work.
 *
 *   npm run bench:hit -- [--requests N] [--rounds R] [--gzip] [--zipf] [--log-level L] [--all-on] [--tracing T] [--root DIR] > /dev/null
 *
 * Prints µs per request of each, per round (the two interleaved), the fastest round of each
 * (interference on a shared machine only adds time), the medians, and the ratio of the fastest.
 * Access lines go to stdout, as etagere writes them: redirect it; results go to stderr.
 * --root DIR runs the etagere of another checkout (its src/, with its own node_modules) against the
 * same harness and fake: "before" and "after" with one script.
 * --zipf requests the l1-zipf10k sequence (bench/zipf.ts) after fetching all 10,000 URLs once,
 * against a ceiling holding 10,000 responses of its own (as ceiling-zipf10k-distinct). --all-on:
 * the l1-hot-allon configuration without Redis (50 tokens not equivalent, consumer keys).
 * --tracing off (the default: no endpoint), ratio (traceidratio at --ratio, 0.01 by default) or on
 * (always_on): spans exported over OTLP/HTTP to a sink in a process of its own (it reads and drops
 * them), so that the proxy's side of exporting is measured and the sink's is not.
 *
 * Not measured here: parsing the request (llhttp, the same for both) and the socket write
 * (the same bytes for both, in the kernel).
 */
import { once } from 'node:events';
import { Duplex } from 'node:stream';
import { IncomingMessage, ServerResponse, type Server } from 'node:http';
import { setImmediate as tick } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startFakeUpstream } from '../fake-github/index.js';
import { parseTokenSpec } from '../fake-github/tokens.js';
import { fakeTokenSpec, poolTokensEnv } from './bench-tokens.js';
import { CONSUMER_KEY, REPO_PATH } from './cases.js';
import { httpGet } from './processes.js';
import { recordedHeaders } from './servers.js';
import { zipfPaths } from './zipf.js';

/** A socket that takes every write at once and keeps nothing (what ServerResponse needs of one). */
class Sink extends Duplex {
  bytesWritten = 0;
  constructor() {
    // Strings stay strings, as a net.Socket hands them to the kernel (no Buffer.from per header block).
    super({ decodeStrings: false });
  }
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.bytesWritten += chunk.length;
    done();
  }
  override _writev(chunks: Array<{ chunk: Buffer | string }>, done: (error?: Error | null) => void): void {
    for (const { chunk } of chunks) this.bytesWritten += chunk.length;
    done();
  }
  override _read(): void {}
  setTimeout(): this {
    return this;
  }
}

type Listener = (req: IncomingMessage, res: ServerResponse) => void;

/** How many connections the requests are spread over (wrk -c64). */
const CONNECTIONS = 64;

/**
 * Runs `paths` through `listener` as GET requests with `headers`, 64 connections round robin,
 * the event loop turning once per 64 requests (Node runs the ticks a response leaves between
 * requests). Returns µs per request.
 */
async function drive(listener: Listener, paths: readonly string[], headers: ReadonlyArray<readonly [string, string]>): Promise<number> {
  const sinks = Array.from({ length: CONNECTIONS }, () => new Sink());
  const current: Array<ServerResponse | undefined> = [];
  const lower: Record<string, string> = {};
  const raw: string[] = [];
  for (const [name, value] of headers) {
    lower[name.toLowerCase()] = value;
    raw.push(name, value);
  }
  const started = process.hrtime.bigint();
  for (let i = 0; i < paths.length; i++) {
    const socket = sinks[i % CONNECTIONS]!;
    // A response still out on this connection (one that waited upstream): the next waits for it, as on a real connection.
    const previous = current[i % CONNECTIONS];
    if (previous !== undefined && !previous.writableFinished) await once(previous, 'finish');
    const req = new IncomingMessage(socket as never);
    req.method = 'GET';
    req.url = paths[i]!;
    req.httpVersionMajor = 1;
    req.httpVersionMinor = 1;
    req.httpVersion = '1.1';
    req.headers = { ...lower };
    req.rawHeaders = raw;
    req.complete = true;
    const res = new ServerResponse(req);
    res.shouldKeepAlive = true;
    res.assignSocket(socket as never);
    // What Node's server does once a response is out: the connection is free for the next one.
    res.once('finish', () => res.detachSocket(socket as never));
    current[i % CONNECTIONS] = res;
    listener(req, res);
    if (i % CONNECTIONS === CONNECTIONS - 1) await tick();
  }
  await tick();
  return Number(process.hrtime.bigint() - started) / 1e3 / paths.length;
}

function requestListener(server: Server): Listener {
  const [listener] = server.listeners('request') as Listener[];
  if (listener === undefined) throw new Error('the server has no request listener');
  return listener;
}

/** The ceiling's listener over what the fake answers for `paths` (one response per distinct path, each its own copy). */
async function ceilingListener(origin: string, paths: readonly string[], headers: Record<string, string>): Promise<Listener> {
  const responses = new Map<string, { status: number; headers: string[]; body: Buffer }>();
  for (const path of new Set(paths)) {
    const reply = await httpGet(`${origin}${path}`, 10_000, headers);
    const flat: string[] = [];
    for (const [name, value] of recordedHeaders(reply.rawHeaders)) flat.push(name.toLowerCase(), value);
    flat.push('content-length', String(reply.body.length));
    responses.set(path, { status: reply.status, headers: flat, body: reply.body });
  }
  return (req, res) => {
    const recorded = responses.get(req.url ?? '')!;
    res.writeHead(recorded.status, recorded.headers);
    res.end(recorded.body);
  };
}

/** An OTLP/HTTP sink in a child process: answers every export 200, reads nothing but the bytes. */
async function startSink(): Promise<{ url: string; child: ChildProcess }> {
  const code =
    "const s=require('http').createServer((q,r)=>{q.resume();q.on('end',()=>r.writeHead(200,{'content-type':'application/json'}).end('{}'))});" +
    "s.listen(0,'127.0.0.1',()=>console.log(s.address().port))";
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return { url: `http://127.0.0.1:${line.toString().trim()}`, child };
}

/** The tracing section of a --tracing mode (off: none). */
function tracingFor(mode: string, ratio: number, endpoint: string | undefined): Record<string, unknown> {
  if (mode === 'off' || endpoint === undefined) return {};
  if (mode === 'ratio') return { tracing: { endpoint, sampler: 'traceidratio', sampler_arg: ratio } };
  if (mode === 'on') return { tracing: { endpoint, sampler: 'always_on' } };
  throw new Error(`--tracing ${mode}: give off, ratio or on`);
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string', default: '50000' },
      rounds: { type: 'string', default: '15' },
      gzip: { type: 'boolean', default: false },
      zipf: { type: 'boolean', default: false },
      'all-on': { type: 'boolean', default: false },
      'log-level': { type: 'string', default: 'info' },
      tracing: { type: 'string', default: 'off' },
      ratio: { type: 'string', default: '0.01' },
      root: { type: 'string' },
    },
    strict: true,
  });
  if (process.stdout.isTTY) {
    process.stderr.write('the access lines go to stdout: redirect it, e.g. npm run bench:hit > /dev/null\n');
    process.exit(2);
  }
  const requests = Number(values.requests);
  const rounds = Number(values.rounds);
  const allOn = values['all-on'];
  const fake = await startFakeUpstream({ anonymousLimit: 1e9, tokenLimit: 1e9, tokens: parseTokenSpec(fakeTokenSpec()) });
  const root = resolve(values.root ?? fileURLToPath(new URL('..', import.meta.url)));
  const { startApp } = (await import(pathToFileURL(`${root}/src/main/app.ts`).href)) as typeof import('../src/main/app.js');
  const { applyEnv, parseConfig } = (await import(
    pathToFileURL(`${root}/src/platform/config/load.ts`).href
  )) as typeof import('../src/platform/config/load.js');
  const sink = values.tracing === 'off' ? undefined : await startSink();
  const raw = {
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: values['log-level'] },
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, ...(allOn ? { token_pool: true } : {}) }],
    ...(allOn
      ? { pool: { equivalent: false }, consumers: { enabled: true, keys: [{ name: CONSUMER_KEY.name, value: CONSUMER_KEY.value }] } }
      : {}),
    ...tracingFor(values.tracing, Number(values.ratio), sink?.url),
  };
  // The pool's 50 tokens as ETAGERE_TOKENS gives them (parseConfig alone reads no environment).
  const config = parseConfig(allOn ? applyEnv(raw, { ETAGERE_TOKENS: poolTokensEnv(50) }) : raw);
  const app = await startApp(config);
  const headers: Array<[string, string]> = [['Host', new URL(app.url).host]];
  if (allOn) headers.push(['X-Etagere-Key', CONSUMER_KEY.value]);
  if (values.gzip) headers.push(['Accept-Encoding', 'gzip']);
  const sent = Object.fromEntries(headers.filter(([name]) => name !== 'Host'));
  const paths = values.zipf
    ? zipfPaths({ prefix: `${REPO_PATH}?z=`, keys: 10_000, exponent: 1, samples: requests, seed: 0x5eed })
    : Array.from({ length: requests }, () => REPO_PATH);
  // Every distinct URL fetched once through the proxy (a miss each), then the hits are measured.
  // httpGet sends exactly these headers (and Host), as wrk does: fetch() would add Accept and Accept-Encoding, other entries.
  for (const path of new Set(paths)) await httpGet(`${app.url}${path}`, 10_000, sent);
  const ceiling = await ceilingListener(fake.url, paths, sent);
  const etagere = requestListener(app.server);
  const times: { etagere: number[]; ceiling: number[] } = { etagere: [], ceiling: [] };
  await drive(etagere, paths.slice(0, 20_000), headers); // warm-up: both optimised before the rounds
  await drive(ceiling, paths.slice(0, 20_000), headers);
  const upstreamBefore = fake.stats().total;
  for (let round = 0; round < rounds; round++) {
    times.etagere.push(await drive(etagere, paths, headers));
    times.ceiling.push(await drive(ceiling, paths, headers));
    process.stderr.write(
      `round ${round + 1}: etagere ${times.etagere.at(-1)!.toFixed(2)} µs, ceiling ${times.ceiling.at(-1)!.toFixed(2)} µs\n`,
    );
  }
  // Interference on a shared machine only ever adds time: the fastest round is the steadier figure.
  const fastest = Math.min(...times.etagere);
  const fastestCeiling = Math.min(...times.ceiling);
  process.stderr.write(
    `${values.zipf ? 'zipf 10k' : 'hot'}${values.gzip ? ', gzip clients' : ''}${allOn ? ', all on (no Redis)' : ''}, log ${values['log-level']}, tracing ${values.tracing === 'ratio' ? `ratio ${values.ratio}` : values.tracing}: ` +
      `etagere ${fastest.toFixed(2)} µs/request, ceiling ${fastestCeiling.toFixed(2)} µs/request (fastest of ${rounds} rounds; medians ` +
      `${median(times.etagere).toFixed(2)} and ${median(times.ceiling).toFixed(2)}), × ceiling ${(fastest / fastestCeiling).toFixed(2)}\n`,
  );
  // Every measured request should be a hit; past max-age (60 s on the fake) some revalidate.
  process.stderr.write(`${fake.stats().total - upstreamBefore} requests reached the upstream during the rounds\n`);
  await app.close();
  await fake.close();
  sink?.child.kill();
}

await main();
