/**
 * A gzip entry that decodes to about 100 MB: a blob of zeros from GitHub's git/blobs endpoint is
 * 75 MB of content, about 103 MB of base64 JSON, and a few hundred KB gzipped, well under the
 * entry cap. Clients that do not take gzip must get it whole, without the proxy decoding it in one
 * synchronous step (cache.max_decoded_bytes): with six such clients downloading at once, another
 * client's hit stays within 300 ms and the proxy's resident memory grows by less than 300 MB.
 *
 * The proxy runs as its own process (its memory is measured on its /metrics), and so do the fake
 * GitHub and the six downloads (their work is not this process's); this process times the hits.
 * When the entry is cold, the proxy stores it first: the body is decoded and its JSON checked a
 * chunk at a time (src/upstream/fetch.ts), never joined or parsed whole, and the hits stay within 100 ms.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, get as httpGet } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, serveCli, type CliProcess, type ServedCli } from '../helpers/cli.js';
import { until } from '../helpers/proxy.js';
import { metric } from '../helpers/replicas.js';

const BLOB_BYTES = 75_000_000;
const IDENTITY_CLIENTS = 6;

/** One GET: status, headers, byte count and sha256 of the body. */
function fetchHashed(
  url: string,
  headers: Record<string, string>,
  agent?: Agent,
): Promise<{ status: number; headers: Record<string, unknown>; bytes: number; sha256: string }> {
  return new Promise((resolve, reject) => {
    httpGet(url, { headers, agent }, (res) => {
      const hash = createHash('sha256');
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        hash.update(chunk);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes, sha256: hash.digest('hex') }));
      res.on('error', reject);
    }).on('error', reject);
  });
}

/** The downloads, in a process of their own: one JSON line per client ({status, encoding, bytes, sha256}). */
const DOWNLOADS = `
const http = require('node:http');
const crypto = require('node:crypto');
const [url, count] = process.argv.slice(1);
let left = Number(count);
for (let i = 0; i < Number(count); i++) {
  http.get(url, { headers: { 'accept-encoding': 'identity' }, agent: false }, (res) => {
    const hash = crypto.createHash('sha256');
    let bytes = 0;
    res.on('data', (c) => { bytes += c.length; hash.update(c); });
    res.on('end', () => {
      process.stdout.write(JSON.stringify({ status: res.statusCode, encoding: res.headers['content-encoding'] ?? null, bytes, sha256: hash.digest('hex') }) + '\\n');
      if (--left === 0) process.exit(0);
    });
    res.on('error', (err) => { process.stdout.write(JSON.stringify({ error: err.message }) + '\\n'); process.exit(1); });
  }).on('error', (err) => { process.stdout.write(JSON.stringify({ error: err.message }) + '\\n'); process.exit(1); });
}
`;

interface Download {
  status?: number;
  encoding?: string | null;
  bytes?: number;
  sha256?: string;
  error?: string;
}

function downloads(url: string, count: number): Promise<Download[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', DOWNLOADS, url, String(count)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('error', reject);
    child.once('close', () =>
      resolve(
        out
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => JSON.parse(line) as Download),
      ),
    );
  });
}

const rssOf = async (admin: string): Promise<number> =>
  Number((await metric(admin, 'etagere_process_resident_memory_bytes')).split(' ')[1]);

/** One hit of another client on a small entry (gzip, on `agent`'s one connection): its time in ms. */
async function timedHit(url: string, agent: Agent): Promise<number> {
  const started = performance.now();
  const answer = await fetchHashed(`${url}/repos/octocat/hello-world`, { 'accept-encoding': 'gzip' }, agent);
  expect(answer.status).toBe(200);
  return performance.now() - started;
}

/**
 * Six identity downloads of `path`, and another client's hits while they run (20 at least): each
 * download must be the whole body. Memory is read beside the hits, never between two of them (a
 * stall then would go unseen).
 */
async function hitsWhileDownloading(
  proxy: ServedCli,
  path: string,
  expected: { bytes: number; sha256: string },
  agent: Agent,
): Promise<{ hits: number[]; grown: number }> {
  const rssBefore = await rssOf(proxy.admin);
  let done = false;
  const running = downloads(`${proxy.url}${path}`, IDENTITY_CLIENTS).finally(() => (done = true));
  let rssPeak = rssBefore;
  const polling = (async () => {
    while (!done) {
      rssPeak = Math.max(rssPeak, await rssOf(proxy.admin));
      await delay(50); // a scrape is work for the proxy too: 20 a second at most
    }
  })();
  const hits: number[] = [];
  while (!done || hits.length < 20) hits.push(await timedHit(proxy.url, agent));
  await polling;
  rssPeak = Math.max(rssPeak, await rssOf(proxy.admin));
  const results = await running;
  expect(results).toHaveLength(IDENTITY_CLIENTS);
  for (const result of results) {
    expect(result.error).toBeUndefined();
    expect(result).toMatchObject({ status: 200, encoding: null, bytes: expected.bytes, sha256: expected.sha256 });
  }
  return { hits, grown: (rssPeak - rssBefore) / 1e6 };
}

describe('a gzip entry that decodes to 100 MB, and clients that do not take gzip', () => {
  /** The fake runs as a process of its own too: its work (rendering, gzipping, sending) never delays the hits timed here. */
  let fake: { cli: CliProcess; url: string };
  let served: ServedCli | undefined;
  let dir: string;
  let blobPath: string;
  let expected: { bytes: number; sha256: string };

  beforeAll(async () => {
    const fakeCli = runCli(['fake-upstream', '--port', '0', '--anon-limit', '1000000000']);
    await until(() => /listening on (http:\/\/\S+)/.test(fakeCli.stdout()), 30_000, 'the fake to listen');
    fake = { cli: fakeCli, url: /listening on (http:\/\/\S+)/.exec(fakeCli.stdout())![1]! };
    const added = await fetch(`${fake.url}/__fake/blobs`, {
      method: 'POST',
      body: JSON.stringify({ path: '/repos/octocat/hello-world', size: BLOB_BYTES }),
    });
    blobPath = ((await added.json()) as { url: string }).url;
    const direct = await fetchHashed(`${fake.url}${blobPath}`, { 'accept-encoding': 'identity' });
    expected = { bytes: direct.bytes, sha256: direct.sha256 };
    dir = mkdtempSync(join(tmpdir(), 'etagere-bomb-'));
    const config = join(dir, 'etagere.yaml');
    writeFileSync(config, `upstreams:\n  - name: github\n    prefix: /\n    url: ${fake.url}\n`);
    served = await serveCli({ ETAGERE_CONFIG: config, LOG_LEVEL: 'warn' });
    const { admin } = served;
    await until(async () => (await fetch(`${admin}/readyz`).catch(() => undefined))?.status === 200, 60_000, 'the proxy to be ready');
  }, 120_000);

  afterAll(async () => {
    served?.cli.child.kill('SIGTERM');
    await served?.cli.exited;
    fake?.cli.child.kill('SIGTERM');
    await fake?.cli.exited;
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it("serves each of six identity clients the whole body while another client's hits stay under 300 ms and memory grows < 300 MB", async () => {
    const { url } = served!;
    // The entry: stored gzip (a few hundred KB), as the proxy asks the upstream for gzip.
    const stored = await fetchHashed(`${url}${blobPath}`, { 'accept-encoding': 'gzip' });
    expect(stored.status).toBe(200);
    expect(stored.headers['content-encoding']).toBe('gzip');
    expect(stored.bytes).toBeLessThan(1024 * 1024);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    await timedHit(url, agent); // stored
    for (let warm = 0; warm < 20; warm++) await timedHit(url, agent);
    expect(String((await fetchHashed(`${url}/repos/octocat/hello-world`, {}, agent)).headers['cache-status'])).toContain('hit');
    const { hits, grown } = await hitsWhileDownloading(served!, blobPath, expected, agent);
    agent.destroy();
    const worst = Math.max(...hits);
    console.log(
      `six identity clients of a 100 MB gzip entry: ${hits.length} hits, worst ${worst.toFixed(1)} ms; RSS grew ${grown.toFixed(0)} MB`,
    );
    expect(worst).toBeLessThanOrEqual(300);
    expect(grown).toBeLessThan(300);
  }, 180_000);

  it("six identity clients of a cold 100 MB gzip entry: storing it (decoded and checked a chunk at a time) holds another client's hits ≤ 100 ms, memory < 150 MB", async () => {
    const { url } = served!;
    // Another blob, cold in the proxy: the first download fetches it (gzip) and stores it, the others wait for that flight.
    const added = await fetch(`${fake.url}/__fake/blobs`, {
      method: 'POST',
      body: JSON.stringify({ path: '/repos/octocat/hello-world', size: BLOB_BYTES + 1 }),
    });
    const coldPath = ((await added.json()) as { url: string }).url;
    const direct = await fetchHashed(`${fake.url}${coldPath}`, { 'accept-encoding': 'identity' });
    await fetchHashed(`${fake.url}${coldPath}`, { 'accept-encoding': 'gzip' }); // the fake gzips it now, not while hits are timed
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    for (let warm = 0; warm < 20; warm++) await timedHit(url, agent);
    const { hits, grown } = await hitsWhileDownloading(served!, coldPath, direct, agent);
    agent.destroy();
    const worst = Math.max(...hits);
    console.log(
      `six identity clients of a cold 100 MB gzip entry: ${hits.length} hits, worst ${worst.toFixed(1)} ms; RSS grew ${grown.toFixed(0)} MB`,
    );
    expect(worst).toBeLessThanOrEqual(100);
    expect(grown).toBeLessThan(150);
  }, 180_000);
});
