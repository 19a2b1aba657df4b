/**
 * Octokit's conditional-request polling loop through etagere, per `cache.client_no_cache` and
 * policy: one GET, then POLLS polls of the same resource with `If-None-Match` (Node's fetch adds
 * `Cache-Control: no-cache` and `Pragma: no-cache` to each). Prints the requests the fake
 * upstream received and the polls' latency (median, p95, total), each case in a fresh proxy.
 *
 *   npx tsx bench/octokit-poll.ts [--polls 50] [--upstream-delay-ms 0]
 *
 * `--upstream-delay-ms` adds that much latency to each of the fake's answers (a stand-in for the
 * round trip to api.github.com).
 */
import { Octokit } from '@octokit/rest';
import { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { startApp } from '../src/main/app.js';
import { parseConfig } from '../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../fake-github/index.js';
import { createLogger } from '../src/platform/log/logger.js';

const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
const REPO = { owner: 'octocat', repo: 'hello-world' };

interface Case {
  name: string;
  cache: Record<string, unknown>;
}

const CASES: Case[] = [
  { name: 'max-age, ignore (default)', cache: {} },
  { name: 'max-age, honor', cache: { client_no_cache: 'honor' } },
  { name: 'revalidate, ignore (default)', cache: { policy: 'revalidate' } },
  { name: 'revalidate, honor', cache: { policy: 'revalidate', client_no_cache: 'honor' } },
];

async function pollOnce(octokit: Octokit, etag: string): Promise<number> {
  const began = process.hrtime.bigint();
  try {
    await octokit.repos.get({ ...REPO, headers: { 'if-none-match': etag } });
  } catch (err) {
    if ((err as { status?: number }).status !== 304) throw err;
  }
  return Number(process.hrtime.bigint() - began) / 1e6;
}

async function runCase(fake: FakeUpstream, spec: Case, polls: number): Promise<string> {
  const sink = new Writable({ write: (_chunk, _enc, cb) => cb() });
  const logger = createLogger({ level: 'warn', destination: sink as unknown as pino.DestinationStream });
  const config = parseConfig({
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: 'warn' },
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, cache: spec.cache }],
  });
  const app = await startApp(config, { logger });
  try {
    await fetch(`${fake.url}/__fake/reset`, { method: 'POST' });
    const octokit = new Octokit({ baseUrl: app.url, log: quiet });
    const first = await octokit.repos.get(REPO);
    const etag = first.headers.etag ?? '';
    const times: number[] = [];
    for (let index = 0; index < polls; index++) times.push(await pollOnce(octokit, etag));
    times.sort((left, right) => left - right);
    const median = times[Math.floor(times.length / 2)] ?? 0;
    const p95 = times[Math.min(times.length - 1, Math.floor(times.length * 0.95))] ?? 0;
    const total = times.reduce((sum, ms) => sum + ms, 0);
    const stats = fake.stats();
    return `| ${spec.name} | ${stats.total} | ${stats.notModified} | ${median.toFixed(2)} | ${p95.toFixed(2)} | ${total.toFixed(0)} |`;
  } finally {
    await app.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { polls: { type: 'string', default: '50' }, 'upstream-delay-ms': { type: 'string', default: '0' } },
  });
  const polls = Number(values.polls);
  const delay = Number(values['upstream-delay-ms']);
  const fake = await startFakeUpstream({ port: 0, anonymousLimit: 1_000_000, tokenLimit: 1_000_000, latencyMs: delay });
  try {
    console.log(`${polls} conditional polls (Octokit, If-None-Match) after one GET; upstream delay ${delay} ms`);
    console.log('| case | upstream requests | upstream 304s | poll median ms | poll p95 ms | polls total ms |');
    console.log('|---|---|---|---|---|---|');
    for (const spec of CASES) console.log(await runCase(fake, spec, polls));
  } finally {
    await fake.close();
  }
}

await main();
