/**
 * A gzip entry that decodes to about 100 MB (a 75 MB blob of zeros from the fake's git/blobs
 * endpoint: 103 MB of base64 JSON, about 300 KB gzipped), read by six clients that do not take gzip
 * (separate curl processes reading as fast as loopback allows), while one client times its hits on
 * another, small entry: the worst of those hits says how long the proxy's event loop was held.
 *
 *   npm run build && npx tsx bench/decoded-bomb.ts [--runs N] [--clients N] [--warm] [--cpu-prof DIR] [--cli FILE]
 *
 * The fake and the proxy (dist/) run as processes of their own, one proxy per run (a fresh cache).
 * The entry is cold: the first curl's request fetches it (gzip) and stores it while the others wait
 * for that flight; `--warm` stores it first (as curl asks for it), so the curls only read it. Prints
 * one line per run: hits, worst and 99th percentile in ms, the proxy's RSS growth, and the seconds
 * the downloads took. `--cpu-prof DIR` writes the proxy's CPU profile of each run there; `--cli FILE`
 * runs another build's dist/src/main/cli.js as the proxy (to compare two builds run by run).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { freePort, installCleanup, spawnServer, stopAll, track, type ServerProcess } from './processes.js';

const THIS_CLI = join(import.meta.dirname, '../dist/src/main/cli.js');
const BLOB_BYTES = 75_000_000;
const SMALL = '/repos/octocat/hello-world';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    clients: { type: 'string', default: '6' },
    warm: { type: 'boolean', default: false },
    cli: { type: 'string' },
    'cpu-prof': { type: 'string' },
  },
});
const runs = Number(values.runs);
/** The proxy's CLI: this checkout's build, or another one's (`--cli`) to compare. */
const CLI = values.cli === undefined ? THIS_CLI : resolve(values.cli);
const clients = Number(values.clients);

/** etagere from dist/ with `args`, in a process of its own, once `readyUrl` answers. */
function server(name: string, dir: string, args: string[], readyUrl: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  return spawnServer({
    name,
    command: process.execPath,
    args: [...args],
    cwd: dir,
    env: { ...process.env, ...env },
    logFile: join(dir, `${name}.log`),
    readyUrl,
    deadlineMs: 30_000,
  });
}

/** One GET, its body drained: status and milliseconds. */
function timedGet(url: string, headers: Record<string, string>, agent?: Agent): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    get(url, { headers, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }));
      res.on('error', reject);
    }).on('error', reject);
  });
}

async function rssOf(admin: string): Promise<number> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const line = text.split('\n').find((row) => row.startsWith('etagere_process_resident_memory_bytes'));
  return Number(line?.split(' ')[1] ?? 0);
}

/** `count` curl processes reading `url` without gzip, as fast as they can; resolves when all are done. */
function curls(url: string, count: number): Promise<number[]> {
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<number>((resolve, reject) => {
          const child = spawn('curl', ['-s', '-o', '/dev/null', '-w', '%{size_download}', '-H', 'Accept-Encoding: identity', url], {
            stdio: ['ignore', 'pipe', 'inherit'],
          });
          track(child);
          let out = '';
          child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
          child.once('error', reject);
          child.once('close', () => resolve(Number(out)));
        }),
    ),
  );
}

async function oneRun(fakeUrl: string, blobPath: string, run: number): Promise<string> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'etagere-decoded-bomb-'));
  const config = join(dir, 'etagere.yaml');
  writeFileSync(config, `upstreams:\n  - name: github\n    prefix: /\n    url: ${fakeUrl}\n`);
  const profile = values['cpu-prof'] === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', resolve(values['cpu-prof'])];
  const url = `http://127.0.0.1:${port}`;
  const admin = `http://127.0.0.1:${adminPort}`;
  const proxy = await server('etagere', dir, [...profile, CLI, 'serve'], `${admin}/readyz`, {
    ETAGERE_CONFIG: config,
    PORT: String(port),
    HOST: '127.0.0.1',
    ADMIN_PORT: String(adminPort),
    LOG_LEVEL: 'warn',
  });
  try {
    if (values.warm === true) {
      // Stored as curl asks (Accept: */*): the entry the identity clients then read (Vary: Accept).
      const stored = await timedGet(`${url}${blobPath}`, { accept: '*/*', 'accept-encoding': 'gzip' });
      if (stored.status !== 200) throw new Error(`the blob answered ${stored.status}`);
    }
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    for (let warm = 0; warm < 50; warm++) await timedGet(`${url}${SMALL}`, { 'accept-encoding': 'gzip' }, agent);
    const rssBefore = await rssOf(admin);
    let rssPeak = rssBefore;
    let done = false;
    const began = performance.now();
    const reading = curls(`${url}${blobPath}`, clients).finally(() => (done = true));
    // Memory is read beside the hits, never between two of them (a stall then would go unseen).
    const polling = (async () => {
      while (!done) {
        rssPeak = Math.max(rssPeak, await rssOf(admin));
        await sleep(50);
      }
    })();
    const hits: number[] = [];
    while (!done) hits.push((await timedGet(`${url}${SMALL}`, { 'accept-encoding': 'gzip' }, agent)).ms);
    const seconds = (performance.now() - began) / 1000;
    await polling;
    const sizes = await reading;
    agent.destroy();
    hits.sort((left, right) => left - right);
    const worst = hits[hits.length - 1]!;
    const p99 = hits[Math.min(hits.length - 1, Math.floor(hits.length * 0.99))]!;
    const whole = sizes.every((size) => size === sizes[0] && size > BLOB_BYTES);
    return (
      `run ${run}: ${hits.length} hits, worst ${worst.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms; ` +
      `RSS +${((rssPeak - rssBefore) / 1e6).toFixed(0)} MB; ${clients} downloads of ${(sizes[0]! / 1e6).toFixed(1)} MB in ${seconds.toFixed(1)} s` +
      (whole ? '' : ` (INCOMPLETE: ${sizes.join(', ')})`)
    );
  } finally {
    await proxy.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

installCleanup();
const fakePort = await freePort();
const fakeUrl = `http://127.0.0.1:${fakePort}`;
const fakeDir = mkdtempSync(join(tmpdir(), 'etagere-decoded-bomb-fake-'));
try {
  await server(
    'fake',
    fakeDir,
    [CLI, 'fake-upstream', '--port', String(fakePort), '--anon-limit', '1000000000'],
    `${fakeUrl}/__fake/stats`,
  );
  const added = await fetch(`${fakeUrl}/__fake/blobs`, {
    method: 'POST',
    body: JSON.stringify({ path: '/repos/octocat/hello-world', size: BLOB_BYTES }),
  });
  const blobPath = ((await added.json()) as { url: string }).url;
  await timedGet(`${fakeUrl}${blobPath}`, { 'accept-encoding': 'gzip' }); // the fake gzips it once, before any run
  for (let run = 1; run <= runs; run++) console.log(await oneRun(fakeUrl, blobPath, run));
} finally {
  await stopAll();
  rmSync(fakeDir, { recursive: true, force: true });
}
