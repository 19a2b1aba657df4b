/**
 * The soak: etagere (as in production: its own process, access log on, a token pool, Redis when
 * redis-server is installed) in front of the fake upstream with faults switched on, under a steady
 * open-loop load of mixed traffic for a long time. Every interval it prints the proxy's RSS, heap,
 * handles and event-loop lag p99 (read from its own /metrics) with the client-side counts, and at
 * the end a verdict: resources flat within 10 % after the warm-up, and no client error.
 *
 *   npm run bench:soak                                   # 10 minutes, 300 requests/s
 *   npm run bench:soak -- --duration 120 --rps 500 --interval 10 --warmup 30 --no-redis
 *
 * A client error is a request that failed (socket error, reset, truncated body, timeout) or an
 * answer nobody should get (a 5xx without GitHub's JSON error shape; a faulted upstream exchange
 * with nothing stored is answered with a GitHub-shaped 502/504, or the upstream's own 500/503).
 * Exits 1 when the verdict fails.
 * Not part of CI (bounded: at most 24 h).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { stringify as toYaml } from 'yaml';
import { freePort, httpGet, httpPostJson, installCleanup, spawnServer, stopAll } from './processes.js';
import { cleanEnv, cliArgs, startRedisServer, type ServerContext } from './servers.js';
import { mulberry32, zipfSampler } from './zipf.js';
import { UNPACED } from './pacing.js';

const HOST = '127.0.0.1';

/** Default fault mix, as rates per upstream request (see docs/fake-upstream.md, "Faults"). */
export const DEFAULT_FAULTS =
  'reset-body:0.01,truncate:0.01,status:0.01,reset-headers:0.005,bad-json:0.005,slow-body:0.005,slow-headers:0.002';

export interface Sample {
  /** Seconds since the load started. */
  t: number;
  rssBytes: number;
  heapBytes: number;
  handles: number;
  lagP99Seconds: number;
}

export interface Verdict {
  ok: boolean;
  lines: string[];
}

/** Sum of every series of one metric family in Prometheus text (labels ignored); NaN when absent. */
export function metricValue(text: string, name: string): number {
  let sum = Number.NaN;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) sum = (Number.isNaN(sum) ? 0 : sum) + value;
  }
  return sum;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * Flat within `tolerance` after warm-up: the median of the last third of the samples taken after
 * the warm-up is at most (1 + tolerance) times the median of the first third (medians, because a
 * heap sampled between two collections saws up and down). Handles also get an absolute slack of 10:
 * sockets to the upstream and timers come and go with the requests in flight at each sample.
 */
export function verdict(samples: readonly Sample[], warmupSeconds: number, errors: number, tolerance = 0.1): Verdict {
  const after = samples.filter((s) => s.t >= warmupSeconds);
  const lines: string[] = [];
  let ok = errors === 0;
  lines.push(`client errors: ${errors}${errors === 0 ? '' : ' (must be 0)'}`);
  if (after.length < 3) {
    lines.push(`only ${after.length} sample(s) after the warm-up: run longer (at least 3 intervals after --warmup)`);
    return { ok: false, lines };
  }
  const third = Math.max(1, Math.floor(after.length / 3));
  const first = after.slice(0, third);
  const last = after.slice(-third);
  const check = (label: string, pick: (sample: Sample) => number, fmt: (value: number) => string, slack = 0): void => {
    const firstMedian = median(first.map(pick));
    const lastMedian = median(last.map(pick));
    const flat = lastMedian <= firstMedian * (1 + tolerance) + slack;
    if (!flat) ok = false;
    const change = firstMedian === 0 ? 0 : ((lastMedian - firstMedian) / firstMedian) * 100;
    lines.push(
      `${label}: ${fmt(firstMedian)} -> ${fmt(lastMedian)} (${change >= 0 ? '+' : ''}${change.toFixed(1)} %) ${flat ? 'flat' : 'GROWING'}`,
    );
  };
  const mib = (v: number): string => `${(v / 2 ** 20).toFixed(1)} MiB`;
  check('rss', (s) => s.rssBytes, mib);
  check('heap used', (s) => s.heapBytes, mib);
  check(
    'handles',
    (s) => s.handles,
    (v) => String(Math.round(v)),
    10,
  );
  lines.push(`event-loop lag p99, worst interval after warm-up: ${(Math.max(...after.map((s) => s.lagP99Seconds)) * 1e3).toFixed(1)} ms`);
  return { ok, lines };
}

/** One request of the mix. */
interface Shot {
  method: 'GET' | 'HEAD';
  path: string;
  headers: Record<string, string>;
  /** Key under which the ETag seen is remembered for conditional requests. */
  etagKey: string;
}

const USERS = ['octocat', 'alice', 'bob', 'carol'];
const CITIES = ['benalmadena', 'cordoba', 'fuengirola', 'helsinki', 'malaga', 'moscow', 'spb'];
const CLIENT_TOKEN = 'demo_token_alice_repo';
const ORG_REPOS = 75;

function makeMix(seed: number): { next(etags: Map<string, string>): Shot; mutationPath(): string } {
  const random = mulberry32(seed);
  const repoRank = zipfSampler(ORG_REPOS, 1.0, random);
  const repoPath = (rank: number): string => `/repos/etagere-org/repo-${String(rank).padStart(3, '0')}`;
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  return {
    next(etags) {
      const draw = random();
      let shot: Shot;
      if (draw < 0.5) shot = { method: 'GET', path: repoPath(repoRank()), headers: {}, etagKey: '' };
      else if (draw < 0.55) shot = { method: 'HEAD', path: repoPath(repoRank()), headers: {}, etagKey: '' };
      else if (draw < 0.65) shot = { method: 'GET', path: `/users/${pick(USERS)}`, headers: {}, etagKey: '' };
      else if (draw < 0.75)
        shot = {
          method: 'GET',
          path: `/orgs/etagere-org/repos?per_page=30&page=${1 + Math.floor(random() * 3)}`,
          headers: {},
          etagKey: '',
        };
      else if (draw < 0.85) {
        // A consumer with its own credential: private data, its own cache partition.
        const path = pick(['/user', '/repos/alice/private-notes', '/user/repos']);
        shot = { method: 'GET', path, headers: { authorization: `token ${CLIENT_TOKEN}` }, etagKey: 'alice' };
      } else if (draw < 0.93) shot = { method: 'GET', path: `/bicyclists/${pick(CITIES)}`, headers: {}, etagKey: '' };
      else if (draw < 0.97) shot = { method: 'GET', path: `/repos/nobody/missing-${Math.floor(random() * 50)}`, headers: {}, etagKey: '' };
      else shot = { method: 'GET', path: '/zen', headers: {}, etagKey: '' };
      shot.etagKey = `${shot.etagKey}|${shot.path}`;
      const etag = etags.get(shot.etagKey);
      if (etag !== undefined && random() < 0.3) shot.headers['if-none-match'] = etag;
      return shot;
    },
    mutationPath: () => repoPath(1 + Math.floor(random() * ORG_REPOS)),
  };
}

interface Counts {
  sent: number;
  ok: number;
  notModified: number;
  notFound: number;
  /**
   * GitHub-shaped 5xx answers to faulted upstream exchanges with nothing stored: 502/504 from the
   * proxy, or the upstream's own 500/503 passed through.
   */
  faultAnswers: number;
  /** 429 from the pool (should not happen with the fake's huge quotas). */
  limited: number;
  errors: number;
  latencies: number[];
  errorKinds: Map<string, number>;
}

const newCounts = (): Counts => ({
  sent: 0,
  ok: 0,
  notModified: 0,
  notFound: 0,
  faultAnswers: 0,
  limited: 0,
  errors: 0,
  latencies: [],
  errorKinds: new Map(),
});

function p99(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '600' },
      rps: { type: 'string', default: '300' },
      interval: { type: 'string', default: '30' },
      warmup: { type: 'string', default: '60' },
      faults: { type: 'string', default: DEFAULT_FAULTS },
      'no-redis': { type: 'boolean', default: false },
      dist: { type: 'boolean', default: false },
      seed: { type: 'string', default: '7' },
    },
    strict: true,
  });
  const num = (name: string, raw: string | undefined, min: number, max: number): number => {
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min || value > max) {
      process.stderr.write(`soak: --${name} must be a number from ${min} to ${max}, got "${raw}"\n`);
      process.exit(2);
    }
    return value;
  };
  const duration = num('duration', values.duration, 5, 86_400);
  const rps = num('rps', values.rps, 1, 100_000);
  const interval = num('interval', values.interval, 1, 3_600);
  const warmup = num('warmup', values.warmup, 0, duration);
  const seed = num('seed', values.seed, 0, 2 ** 31);

  installCleanup();
  const root = resolve(import.meta.dirname, '..');
  const tmpDir = mkdtempSync(join(tmpdir(), 'etagere-soak-'));
  const ctx: ServerContext = { root, tmpDir, useDist: values.dist === true, logLevel: 'info', pin: false };
  const say = (line: string): void => void process.stdout.write(`${line}\n`);

  const fakePort = await freePort(HOST);
  const fakeOrigin = `http://${HOST}:${fakePort}`;
  await spawnServer({
    name: 'fake-upstream',
    command: process.execPath,
    args: cliArgs(ctx, [
      'fake-upstream',
      '--host',
      HOST,
      '--port',
      String(fakePort),
      '--anon-limit',
      '1000000000',
      '--token-limit',
      '1000000000',
    ]),
    cwd: root,
    env: cleanEnv(),
    logFile: join(tmpDir, 'fake.log'),
    readyUrl: `${fakeOrigin}/__fake/stats`,
    deadlineMs: 20_000,
  });
  const faults =
    values.faults === ''
      ? []
      : values.faults!.split(',').map((part) => {
          const [kind, rate] = part.split(':');
          return {
            kind,
            rate: Number(rate ?? '1'),
            ...(kind === 'slow-headers' ? { ms: 3_000 } : {}),
            ...(kind === 'slow-body' ? { ms: 1_000 } : {}),
          };
        });
  const faultStatus = await httpPostJson(`${fakeOrigin}/__fake/faults`, { faults });
  if (faultStatus !== 200) throw new Error(`the fake refused the fault rules (${faultStatus}): ${values.faults}`);

  let redisUrl: string | undefined;
  if (values['no-redis'] !== true) {
    try {
      redisUrl = (await startRedisServer(ctx, 0)).url;
    } catch {
      say('soak: redis-server not available: running on L1 only (--no-redis to silence)');
    }
  }
  const port = await freePort(HOST);
  const adminPort = await freePort(HOST);
  const config = {
    listen: { host: HOST, port },
    admin: { host: HOST, port: adminPort },
    log: { level: 'info' },
    public_url: `http://${HOST}:${port}`,
    ...(redisUrl === undefined ? {} : { redis: { url: redisUrl } }),
    pool: {
      tokens: [
        { name: 'alice-public', value: 'demo_token_alice_public' },
        { name: 'bob-public', value: 'demo_token_bob_public' },
      ],
      // 300 req/s on two tokens is far past GitHub's 900 points a minute: the soak is about leaks
      // and faults, not pacing (bench/pacing.ts), so the fake's faults, not paced 429s, are what it sees.
      points_per_minute: UNPACED,
    },
    upstreams: [
      // Short freshness, so that revalidations (and faults on them) happen all along the run.
      {
        name: 'github',
        prefix: '/',
        url: fakeOrigin,
        token_pool: true,
        cache: { policy: 'max-age', max_age_cap_seconds: 5 },
        timeouts: { headers_ms: 2_000, body_ms: 2_000 },
      },
      {
        name: 'cyclists',
        prefix: '/bicyclists',
        url: fakeOrigin,
        cache: { policy: 'ttl', ttl_seconds: 5 },
        timeouts: { headers_ms: 2_000, body_ms: 2_000 },
      },
    ],
  };
  const configFile = join(tmpDir, 'etagere.yaml');
  writeFileSync(configFile, toYaml(config));
  const proxyOrigin = `http://${HOST}:${port}`;
  const adminOrigin = `http://${HOST}:${adminPort}`;
  await spawnServer({
    name: 'etagere',
    command: process.execPath,
    args: cliArgs(ctx, ['serve', '--config', configFile]),
    cwd: root,
    env: cleanEnv(),
    logFile: join(tmpDir, 'etagere.log'),
    discardStdout: true,
    readyUrl: `${adminOrigin}/readyz`,
    deadlineMs: 20_000,
  });

  say(
    `soak: ${duration} s at ${rps} req/s, samples every ${interval} s, warm-up ${warmup} s, Redis ${redisUrl === undefined ? 'off' : 'on'}, faults ${values.faults || 'none'}`,
  );
  const client = new Pool(proxyOrigin, { connections: 64, headersTimeout: 10_000, bodyTimeout: 10_000 });
  const mix = makeMix(seed);
  const etags = new Map<string, string>();
  const total = newCounts();
  let window = newCounts();
  const samples: Sample[] = [];
  const inFlight = new Set<Promise<void>>();

  const fire = (): void => {
    const shot = mix.next(etags);
    const started = performance.now();
    total.sent++;
    window.sent++;
    const count = (counts: Counts, status: number | string): void => {
      counts.latencies.push(performance.now() - started);
      if (typeof status === 'string') {
        counts.errors++;
        counts.errorKinds.set(status, (counts.errorKinds.get(status) ?? 0) + 1);
      } else if (status === 200) counts.ok++;
      else if (status === 304) counts.notModified++;
      else if (status === 404 || status === 401) counts.notFound++;
      else if (status >= 500) counts.faultAnswers++;
      else if (status === 429) counts.limited++;
      else {
        counts.errors++;
        counts.errorKinds.set(`status ${status}`, (counts.errorKinds.get(`status ${status}`) ?? 0) + 1);
      }
    };
    const exchange = (async (): Promise<void> => {
      let outcome: number | string;
      try {
        const res = await client.request({ method: shot.method, path: shot.path, headers: shot.headers });
        const body = await res.body.arrayBuffer();
        const etag = res.headers.etag;
        if (res.statusCode === 200 && typeof etag === 'string') etags.set(shot.etagKey, etag);
        const declared = Number(res.headers['content-length']);
        if (shot.method === 'GET' && Number.isFinite(declared) && declared !== body.byteLength)
          outcome = 'body length differs from content-length';
        else if (res.statusCode >= 500 && shot.method === 'GET' && !isGitHubError(body))
          outcome = `status ${res.statusCode} without a JSON error body`;
        else outcome = res.statusCode;
      } catch (err) {
        outcome = (err as { code?: string }).code ?? (err as Error).message;
      }
      count(total, outcome);
      count(window, outcome);
    })();
    inFlight.add(exchange);
    void exchange.finally(() => inFlight.delete(exchange));
  };

  const startedAt = performance.now();
  const end = startedAt + duration * 1_000;
  let nextSample = startedAt + interval * 1_000;
  let owed = 0;
  let last = startedAt;
  let mutationDue = startedAt + 2_000;
  while (performance.now() < end) {
    await new Promise<void>((r) => setTimeout(r, 10));
    const now = performance.now();
    owed += ((now - last) / 1_000) * rps;
    last = now;
    while (owed >= 1) {
      owed--;
      fire();
    }
    if (now >= mutationDue) {
      mutationDue = now + 2_000;
      void httpPostJson(`${fakeOrigin}/__fake/mutate`, { path: mix.mutationPath() }).catch(() => undefined);
    }
    if (now >= nextSample) {
      nextSample += interval * 1_000;
      const elapsed = Math.round((now - startedAt) / 1_000);
      const text = (await httpGet(`${adminOrigin}/metrics`, 5_000)).body.toString();
      const sample: Sample = {
        t: elapsed,
        rssBytes: metricValue(text, 'etagere_process_resident_memory_bytes'),
        heapBytes: metricValue(text, 'etagere_nodejs_heap_size_used_bytes'),
        handles: metricValue(text, 'etagere_nodejs_active_handles'),
        lagP99Seconds: metricValue(text, 'etagere_nodejs_eventloop_lag_p99_seconds'),
      };
      samples.push(sample);
      say(
        `t=${String(elapsed).padStart(5)}s rss=${(sample.rssBytes / 2 ** 20).toFixed(1)}MiB heap=${(sample.heapBytes / 2 ** 20).toFixed(1)}MiB ` +
          `handles=${sample.handles} lag_p99=${(sample.lagP99Seconds * 1e3).toFixed(1)}ms | ` +
          `sent=${window.sent} ok=${window.ok} 304=${window.notModified} 404=${window.notFound} fault-5xx=${window.faultAnswers} ` +
          `429=${window.limited} errors=${window.errors} p99=${p99(window.latencies).toFixed(1)}ms${kinds(window)}`,
      );
      window = newCounts();
    }
  }
  await Promise.allSettled([...inFlight]);
  await client.close();
  const stats = (await httpGet(`${fakeOrigin}/__fake/faults`, 5_000)).body.toString();
  const result = verdict(samples, warmup, total.errors);
  say('');
  say(
    `soak: ${total.sent} requests: ${total.ok} 200, ${total.notModified} 304, ${total.notFound} 404/401, ${total.faultAnswers} fault 5xx, ${total.limited} 429, ${total.errors} errors${kinds(total)}; p99 ${p99(total.latencies).toFixed(1)} ms`,
  );
  say(`soak: faults injected by the fake: ${injectedSummary(stats)}`);
  for (const line of result.lines) say(`soak: ${line}`);
  say(`soak: verdict ${result.ok ? 'PASS' : 'FAIL'}`);
  await stopAll();
  if (result.ok) rmSync(tmpDir, { recursive: true, force: true });
  else say(`soak: logs kept in ${tmpDir}`);
  process.exit(result.ok ? 0 : 1);
}

function isGitHubError(body: ArrayBuffer): boolean {
  try {
    const parsed = JSON.parse(Buffer.from(body).toString()) as { message?: unknown };
    return typeof parsed.message === 'string';
  } catch {
    return false;
  }
}

function kinds(counts: Counts): string {
  return counts.errorKinds.size === 0 ? '' : ` (${[...counts.errorKinds].map(([k, n]) => `${k}: ${n}`).join(', ')})`;
}

function injectedSummary(json: string): string {
  try {
    const parsed = JSON.parse(json) as { faults?: Array<{ kind?: string; injected?: number }> };
    return (parsed.faults ?? []).map((f) => `${f.kind} ${f.injected ?? '?'}`).join(', ') || 'none';
  } catch {
    return 'unknown';
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch(async (err: unknown) => {
    process.stderr.write(`soak: ${(err as Error).stack ?? String(err)}\n`);
    await stopAll();
    process.exit(1);
  });
}
